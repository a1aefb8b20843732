"""The default tokenizer: a byte-level BPE trained on the shipped corpus, cached on disk.

Switchboard must tokenize with no model download and no network, so the default is
trained with the HF ``tokenizers`` library on ``switchboard/text/corpus/*.txt`` the first
time it is needed (about a tenth of a second) and cached as a ``tokenizer.json``. The
cache path is keyed by a SHA-256 over the corpus, the training settings and the
``tokenizers`` version, so a change to any of them trains a new file instead of reusing
a stale one. Training is deterministic: the same inputs give byte-identical JSON, hence
the same token ids in every process and on every machine with the same ``tokenizers``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

__all__ = [
    "DEFAULT_SETTINGS",
    "TrainingSettings",
    "cache_key",
    "default_cache_dir",
    "default_tokenizer_path",
    "ensure_default_tokenizer",
    "read_corpus",
    "train_tokenizer",
    "write_atomically",
]

log = logging.getLogger(__name__)

#: Environment variable naming the cache directory (default ``~/.cache/switchboard``).
CACHE_DIR_ENV = "SWITCHBOARD_CACHE_DIR"


@dataclass(frozen=True, slots=True)
class TrainingSettings:
    """Everything besides the corpus that decides the trained tokenizer."""

    #: Upper bound on the vocabulary, special tokens and the 256 byte symbols included.
    vocab_size: int = 4096
    #: A pair must occur this often to be merged. 1 lets the trainer fill ``vocab_size``
    #: from a small corpus; it still merges the most frequent pairs first.
    min_frequency: int = 1
    #: Added first, so they take ids 0, 1, ...; ``<|endoftext|>`` (id 0) is the EOS token.
    special_tokens: tuple[str, ...] = ("<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>")


DEFAULT_SETTINGS = TrainingSettings()


def read_corpus() -> list[tuple[str, str]]:
    """The shipped corpus as ``(file name, text)`` pairs, sorted by name."""
    folder = resources.files("switchboard.text") / "corpus"
    entries = [entry for entry in folder.iterdir() if entry.name.endswith(".txt")]
    entries.sort(key=lambda entry: entry.name)
    return [(entry.name, entry.read_text(encoding="utf-8")) for entry in entries]


def cache_key(corpus: Sequence[tuple[str, str]], settings: TrainingSettings) -> str:
    """Hex SHA-256 naming the tokenizer trained from ``corpus`` with ``settings``."""
    digest = hashlib.sha256()
    recipe = {"settings": dataclasses.asdict(settings), "tokenizers": tokenizers.__version__}
    digest.update(json.dumps(recipe, sort_keys=True).encode())
    for name, text in corpus:
        for part in (name.encode(), text.encode()):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return digest.hexdigest()


def train_tokenizer(
    corpus: Sequence[tuple[str, str]], settings: TrainingSettings = DEFAULT_SETTINGS
) -> tokenizers.Tokenizer:
    """Train a byte-level BPE (GPT-2 style pre-tokenization, no normalizer) on ``corpus``.

    Without a normalizer, ``decode(encode(text)) == text`` for every string, and every
    byte is in the alphabet, so no input is ever unknown.
    """
    backend = tokenizers.Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=settings.vocab_size,
        min_frequency=settings.min_frequency,
        special_tokens=list(settings.special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = [line for _, text in corpus for line in text.splitlines()]
    backend.train_from_iterator(lines, trainer=trainer)
    return backend


def default_cache_dir() -> Path:
    """``$SWITCHBOARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/switchboard``, else ``~/.cache/...``."""
    if configured := os.environ.get(CACHE_DIR_ENV):
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "switchboard"


def default_tokenizer_path(cache_dir: Path, key: str) -> Path:
    """Where the default tokenizer with cache key ``key`` lives under ``cache_dir``."""
    return cache_dir / "tokenizer" / f"default-{key[:16]}" / "tokenizer.json"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see either no file or the whole file.

    The text goes to a temporary file in the same directory, is flushed to disk and then
    renamed over ``path`` (``os.replace`` is atomic within one file system). Processes
    racing at first start each write their own temporary file; the last rename wins and,
    training being deterministic, every candidate is identical.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def ensure_default_tokenizer(
    cache_dir: Path | None = None, settings: TrainingSettings = DEFAULT_SETTINGS
) -> tuple[tokenizers.Tokenizer, str]:
    """The default tokenizer and a description of where it came from.

    Loads the cached ``tokenizer.json`` when present and readable; otherwise trains it
    and caches it. A cache that cannot be written (read-only home, full disk) is logged
    and the freshly trained tokenizer is used from memory, so serving still starts.
    """
    corpus = read_corpus()
    key = cache_key(corpus, settings)
    path = default_tokenizer_path(cache_dir or default_cache_dir(), key)
    try:
        return tokenizers.Tokenizer.from_str(path.read_text(encoding="utf-8")), str(path)
    except FileNotFoundError:
        pass
    # The library reports a corrupt file with a bare Exception; retraining replaces it.
    except Exception as error:
        log.warning("default tokenizer cache %s is unreadable (%s); retraining", path, error)
    started = time.perf_counter()
    backend = train_tokenizer(corpus, settings)
    elapsed = time.perf_counter() - started
    try:
        write_atomically(path, backend.to_str())
    except OSError as error:
        log.warning("cannot cache the default tokenizer at %s: %s", path, error)
        return backend, f"default tokenizer (in memory, key {key[:16]})"
    log.info("trained the default tokenizer in %.3f s, cached at %s", elapsed, path)
    return backend, str(path)
