"""llama.cpp's vocabulary files and tokenizer test vectors, out of the llama-cpp-python sdist.

The sdist (``make llama`` downloads it) carries ``vendor/llama.cpp/models/ggml-vocab-*``:
vocabulary-only GGUF files of many model families, most with ``.inp``/``.out`` test
vectors that llama.cpp's ``tests/test-tokenizer-0.cpp`` checks. The sdist is
``$LLAMA_CPP_SDIST`` (the Makefile sets it), else
``~/.cache/switchboard/sdist/llama_cpp_python-0.3.36.tar.gz`` (under
``$SWITCHBOARD_CACHE_DIR`` when that is set). Its vocabulary members are extracted once
into ``<cache>/llama-vocab/<version>/``: into a temporary directory first, renamed into
place whole, so parallel runs never see half a directory. Without the sdist every
function here skips the test (which the suite's conftest fails under ``CI=true`` for
integration tests), naming ``make llama``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest

from switchboard.text.default_tokenizer import default_cache_dir
from switchboard.text.gguf_tokenizer import GgufTokenizer
from switchboard.text.llama_runtime import llama_api

__all__ = [
    "KNOWN_VOCABS",
    "LLAMA_CPP_VERSION",
    "SDIST_ENV",
    "TestVector",
    "llama_pieces",
    "read_test_vectors",
    "sdist_path",
    "vocab_catalogue",
    "vocab_dir",
    "vocab_file",
    "vocab_names",
]

#: The llama-cpp-python release the ``llama`` extra pins.
LLAMA_CPP_VERSION = "0.3.36"
#: Names the sdist to read.
SDIST_ENV = "LLAMA_CPP_SDIST"
#: Where the vocabulary files sit inside the sdist, below its top directory.
_MEMBER_DIR = "vendor/llama.cpp/models/"
_MEMBER_PREFIX = "ggml-vocab-"
#: What separates two inputs in a ``.inp`` file (test-tokenizer-0.cpp's ``sep``).
_INPUT_SEPARATOR = "\n__ggml_vocab_test__\n"

#: The 0.3.36 sdist's vocabularies, each with whether it has test vectors: what
#: :func:`vocab_catalogue` says when the sdist is absent (the tests then skip).
KNOWN_VOCABS = {
    name: name not in ("aquila", "baichuan", "gpt-neox", "nomic-bert-moe")
    for name in (
        *("aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm"),
        *("falcon", "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt"),
        *("nomic-bert-moe", "phi-3", "qwen2", "qwen35", "refact", "starcoder"),
    )
}

#: One test vector: a text and the ids llama.cpp encodes it to (no BOS, no specials).
TestVector = tuple[str, list[int]]


def sdist_path() -> Path:
    """The sdist: ``$LLAMA_CPP_SDIST``, else the one ``make llama`` caches."""
    configured = os.environ.get(SDIST_ENV)
    if configured:
        return Path(configured)
    return default_cache_dir() / "sdist" / f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz"


def _cache_key(sdist: Path) -> str:
    """``0.3.36`` for ``llama_cpp_python-0.3.36.tar.gz``; the file name otherwise."""
    name = sdist.name.removesuffix(".tar.gz")
    return name.removeprefix("llama_cpp_python-")


def _cached_dir() -> Path:
    """Where the vocabulary files of :func:`sdist_path` are (or will be) extracted."""
    return default_cache_dir() / "llama-vocab" / _cache_key(sdist_path())


def _extract(sdist: Path, target: Path) -> None:
    """Extract the sdist's vocabulary members flat into ``target``, which appears whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with tarfile.open(sdist) as archive:
            for member in archive:
                top, _, inner = member.name.partition("/")
                name = inner.removeprefix(_MEMBER_DIR)
                if not top or inner == name or "/" in name or not member.isfile():
                    continue
                if not name.startswith(_MEMBER_PREFIX):
                    continue
                source = archive.extractfile(member)
                assert source is not None  # a regular file member always has content
                with source, open(scratch / name, "wb") as sink:
                    shutil.copyfileobj(source, sink)
        try:
            scratch.rename(target)
        except OSError:
            # Another run renamed its copy first (the target exists and is not empty).
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def vocab_dir() -> Path:
    """The directory of extracted ``ggml-vocab-*`` files (extracting them the first time);
    skips the calling test when the sdist is absent."""
    sdist = sdist_path()
    target = _cached_dir()
    if target.is_dir():
        return target
    if not sdist.is_file():
        pytest.skip(f"no llama-cpp-python sdist at {sdist} (run make llama, or set {SDIST_ENV})")
    _extract(sdist, target)
    return target


def vocab_names() -> list[str]:
    """Every vocabulary in the sdist by short name (``llama-spm``, ``qwen2``...), sorted."""
    return sorted(
        path.name.removeprefix(_MEMBER_PREFIX).removesuffix(".gguf")
        for path in vocab_dir().glob(f"{_MEMBER_PREFIX}*.gguf")
    )


def vocab_catalogue() -> dict[str, bool]:
    """Vocabulary name -> whether it has test vectors, for parametrizing at collection:
    read from the sdist (extracted the first time), or :data:`KNOWN_VOCABS` without one.
    Never skips, so a missing sdist skips (or, under CI, fails) each test, not the module.
    """
    if not sdist_path().is_file() and not _cached_dir().is_dir():
        return dict(KNOWN_VOCABS)
    directory = vocab_dir()
    return {
        name: _has_vectors(directory / f"{_MEMBER_PREFIX}{name}.gguf") for name in vocab_names()
    }


def _has_vectors(vocab: Path) -> bool:
    return all(vocab.with_name(vocab.name + suffix).is_file() for suffix in (".inp", ".out"))


def vocab_file(name: str) -> Path:
    """The GGUF vocabulary file of ``name`` (``"llama-spm"`` -> ``ggml-vocab-llama-spm.gguf``)."""
    path = vocab_dir() / f"{_MEMBER_PREFIX}{name}.gguf"
    if not path.is_file():
        raise FileNotFoundError(f"the llama-cpp-python sdist has no vocabulary {path.name}")
    return path


def read_test_vectors(name: str) -> list[TestVector] | None:
    """The ``.inp``/``.out`` test vectors of vocabulary ``name``, None if it has none.

    Parsed as test-tokenizer-0.cpp parses them: the inputs are the ``.inp`` text split on
    ``"\\n__ggml_vocab_test__\\n"``; each ``.out`` line, stripped, is one input's ids
    separated by spaces. As there (a map from text to ids), a repeated input keeps its
    last ids.
    """
    vocab = vocab_file(name)
    if not _has_vectors(vocab):
        return None
    inputs_file = vocab.with_name(vocab.name + ".inp")
    outputs_file = vocab.with_name(vocab.name + ".out")
    raw = inputs_file.read_bytes().decode("utf-8")
    inputs: list[str] = []
    position = 0
    while position < len(raw):
        found = raw.find(_INPUT_SEPARATOR, position)
        if found < 0:
            inputs.append(raw[position:])
            break
        inputs.append(raw[position:found])
        position = found + len(_INPUT_SEPARATOR)
    lines = outputs_file.read_bytes().decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # getline yields no line after the final newline
    if len(inputs) != len(lines):
        raise ValueError(f"{inputs_file.name} has {len(inputs)} inputs, {len(lines)} outputs")
    vectors: dict[str, list[int]] = {}
    for text, line in zip(inputs, lines, strict=True):
        vectors[text] = [int(token) for token in line.strip().split(" ") if token]
    return list(vectors.items())


def llama_pieces(tokenizer: GgufTokenizer, ids: list[int], *, special: bool = False) -> str:
    """The text llama.cpp's server streams for generated ``ids``: each id's piece
    (``llama_token_to_piece``, no lstrip: a leading space kept; special tokens only with
    ``special``), the bytes joined before they are decoded. The reference our decode
    after a prompt is checked against."""
    api = llama_api()
    joined = b""
    for token_id in ids:
        buffer = ctypes.create_string_buffer(256)
        count = api.llama_token_to_piece(tokenizer.llama_vocab, token_id, buffer, 256, 0, special)
        assert 0 <= count <= 256, (token_id, count)
        joined += buffer.raw[:count]
    return joined.decode("utf-8", errors="replace")
