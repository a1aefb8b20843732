"""Writing a generated model as a GGUF file, and the content-keyed cache of them.

:func:`build_model` names a model by a SHA-256 over everything that decides its bytes
(the spec, the vocabulary's digest, :data:`BUILDER_VERSION` and numpy's version, whose
generators draw the weights) and writes it only when no file of that name exists, so a
model is generated once per machine and a change to any input makes a new file instead
of reusing a stale one. Files appear atomically: processes racing on a first build each
write a temporary file and rename it into place, and the models they write are
identical.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Final

import gguf
import numpy as np

from switchboard.models.chat_templates import with_chat_template
from switchboard.models.spec import ModelSpec
from switchboard.models.vocab import VocabSource, Vocabulary
from switchboard.models.weights import tensor_plan, tensor_values

__all__ = [
    "BUILDER_VERSION",
    "build_model",
    "cache_key",
    "default_model_dir",
    "model_path",
    "write_model",
]

#: Bumped whenever the weights or metadata written for a given spec change.
BUILDER_VERSION: Final = 3

#: The general.file_type of a model whose every tensor is f32 (llama.cpp's LLAMA_FTYPE_ALL_F32).
_ALL_F32: Final = 0


def default_model_dir() -> Path:
    """``models`` under Switchboard's cache directory (``$SWITCHBOARD_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/switchboard``, else ``~/.cache/switchboard``), which the default
    tokenizer's cache shares."""
    from switchboard.text.default_tokenizer import default_cache_dir

    return default_cache_dir() / "models"


def cache_key(spec: ModelSpec, vocab_digest: str) -> str:
    """Hex SHA-256 naming the model of ``spec`` on the vocabulary with ``vocab_digest``."""
    recipe = {
        "spec": spec.as_record(),
        "vocab": vocab_digest,
        "builder": BUILDER_VERSION,
        "numpy": np.__version__,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def model_path(spec: ModelSpec, vocab: VocabSource, cache_dir: Path) -> Path:
    """Where :func:`build_model` keeps ``spec``'s model on ``vocab`` under ``cache_dir``:
    ``<spec>-<vocab>-<first 16 hex digits of the cache key>.gguf``."""
    key = cache_key(spec, vocab.digest())
    return cache_dir / f"{spec.name}-{vocab.name}-{key[:16]}.gguf"


def _add_metadata(writer: gguf.GGUFWriter, spec: ModelSpec, vocab: Vocabulary, name: str) -> None:
    writer.add_name(name)
    writer.add_file_type(_ALL_F32)
    writer.add_context_length(spec.n_ctx)
    writer.add_embedding_length(spec.n_embd)
    writer.add_block_count(spec.n_layer)
    writer.add_feed_forward_length(spec.n_ff)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    writer.add_layer_norm_rms_eps(spec.rms_eps)
    writer.add_rope_dimension_count(spec.head_dim)
    writer.add_rope_freq_base(spec.rope_theta)
    writer.add_vocab_size(vocab.size)
    # Provenance: llama.cpp ignores keys it does not know.
    writer.add_string("switchboard.model_spec", json.dumps(spec.as_record(), sort_keys=True))
    writer.add_uint32("switchboard.builder_version", BUILDER_VERSION)
    for entry in with_chat_template(vocab).entries:
        writer.add_key_value(entry.key, entry.value, entry.type, entry.sub_type)


def _write_gguf(spec: ModelSpec, vocab: Vocabulary, path: Path, name: str) -> None:
    writer = gguf.GGUFWriter(path, "llama")
    plan = tensor_plan(spec, vocab.size)
    _add_metadata(writer, spec, vocab, name)
    float32 = np.dtype(np.float32)
    for tensor in plan:
        writer.add_tensor_info(tensor.name, tensor.shape, float32, tensor.size * float32.itemsize)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        # One tensor at a time, in the order announced: a BENCH model's 233 MB of
        # weights are never all in memory at once.
        for tensor in plan:
            writer.write_tensor_data(tensor_values(spec, tensor))
        writer.flush()
        assert writer.fout is not None  # open since write_header_to_file
        for handle in writer.fout:
            os.fsync(handle.fileno())
    finally:
        writer.close()


def write_model(spec: ModelSpec, vocab: Vocabulary, path: Path, *, name: str | None = None) -> None:
    """Write ``spec``'s model with ``vocab`` to ``path``, atomically.

    Readers see no file or the whole file: it is written to a temporary file beside
    ``path``, synced and renamed over it (``os.replace``, atomic within a file
    system); on any failure the temporary file is removed. ``name`` is the model's
    ``general.name`` (default ``switchboard-<spec name>``). The file is private to
    its user (mode 0600, as ``mkstemp`` makes it), like the rest of Switchboard's cache.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    os.close(descriptor)
    try:
        _write_gguf(spec, vocab, Path(temporary), name or f"switchboard-{spec.name}")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def build_model(spec: ModelSpec, vocab_source: VocabSource, cache_dir: Path | None = None) -> Path:
    """The path of ``spec``'s model on ``vocab_source``'s vocabulary, built if missing.

    ``cache_dir`` defaults to :func:`default_model_dir`. A file already at
    :func:`model_path` is reused as is (its name is its content's key); otherwise the
    vocabulary is loaded and the model written with :func:`write_model`.
    :class:`~switchboard.models.vocab.VocabError` if the source gives no vocabulary.
    """
    path = model_path(spec, vocab_source, cache_dir or default_model_dir())
    if not path.exists():
        vocab = vocab_source.load()
        write_model(spec, vocab, path, name=f"switchboard-{spec.name}-{vocab_source.name}")
    return path
