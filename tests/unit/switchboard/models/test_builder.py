"""Writing models: the content-keyed cache, atomic files, and what the file holds."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFReader

import switchboard.models.builder as builder
from switchboard.models.builder import (
    build_model,
    cache_key,
    default_model_dir,
    model_path,
    write_model,
)
from switchboard.models.spec import TINY
from switchboard.models.weights import tensor_plan, tensor_values
from tests.unit.switchboard.models.small import SMALL_VOCAB_SIZE, CountingSource, small_vocabulary


def scalar(reader: GGUFReader, key: str) -> object:
    return reader.fields[key].contents()


class TestCacheKey:
    """The key changes with anything that changes the model's bytes."""

    def test_changes_with_each_spec_field(self) -> None:
        """Every field of the spec is in the key."""
        base = cache_key(TINY, "v" * 64)
        changes: dict[str, Any] = {
            "name": "other",
            "n_layer": 3,
            "n_embd": 128,
            "n_ff": 100,
            "n_head": 8,
            "n_head_kv": 2,
            "n_ctx": 2048,
            "rope_theta": 500000.0,
            "rms_eps": 1e-6,
            "seed": 1,
        }
        assert set(changes) == set(TINY.as_record())
        keys = {
            cache_key(dataclasses.replace(TINY, **{f: v}), "v" * 64) for f, v in changes.items()
        }
        assert base not in keys and len(keys) == len(changes)

    def test_changes_with_vocabulary_builder_and_numpy(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Another vocabulary digest, builder version or numpy version is another key."""
        base = cache_key(TINY, "a" * 64)
        assert cache_key(TINY, "b" * 64) != base
        monkeypatch.setattr(builder, "BUILDER_VERSION", builder.BUILDER_VERSION + 1)
        bumped = cache_key(TINY, "a" * 64)
        monkeypatch.setattr(np, "__version__", "0.0.0")
        assert len({base, bumped, cache_key(TINY, "a" * 64)}) == 3

    def test_path_names_spec_vocabulary_and_key(
        self, source: CountingSource, tmp_path: Path
    ) -> None:
        """The file is <spec>-<vocab>-<16 hex digits of the key>.gguf, found without loading."""
        path = model_path(TINY, source, tmp_path)
        assert path == tmp_path / f"tiny-small-{cache_key(TINY, source.digest())[:16]}.gguf"
        assert source.loads == 0

    def test_default_directory(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """Models live in models/ of Switchboard's cache directory, as the tokenizer's does."""
        monkeypatch.setenv("SWITCHBOARD_CACHE_DIR", str(tmp_path))
        assert default_model_dir() == tmp_path / "models"
        monkeypatch.delenv("SWITCHBOARD_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert default_model_dir() == tmp_path / "xdg" / "switchboard" / "models"


class TestBuildModel:
    """build_model writes once, then reuses the file."""

    def test_builds_then_reuses(self, source: CountingSource, tmp_path: Path) -> None:
        """The second build loads nothing and leaves the file as it was."""
        path = build_model(TINY, source, tmp_path)
        written = path.stat()
        assert build_model(TINY, source, tmp_path) == path
        assert source.loads == 1
        assert (path.stat().st_ino, path.stat().st_mtime_ns) == (
            written.st_ino,
            written.st_mtime_ns,
        )
        assert [entry.name for entry in tmp_path.iterdir()] == [path.name]

    def test_another_vocabulary_is_another_file(
        self, source: CountingSource, tmp_path: Path
    ) -> None:
        """A source with another digest builds a file of its own."""
        other = CountingSource(content_digest="1" * 64)
        assert build_model(TINY, source, tmp_path) != build_model(TINY, other, tmp_path)
        assert other.loads == 1


class TestWriteModel:
    """Files appear whole or not at all."""

    def test_failure_leaves_nothing(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """A write failing halfway leaves neither the model nor its temporary file."""
        calls = []

        def failing(spec: object, tensor: object) -> object:
            calls.append(tensor)
            if len(calls) == 5:
                raise OSError(28, "No space left on device")
            return tensor_values(spec, tensor)  # type: ignore[arg-type]

        monkeypatch.setattr(builder, "tensor_values", failing)
        with pytest.raises(OSError, match="No space"):
            write_model(TINY, small_vocabulary(), tmp_path / "model.gguf")
        assert list(tmp_path.iterdir()) == []

    def test_racing_writers(self, tmp_path: Path) -> None:
        """Writers racing on one path leave one readable file, no temporary files."""
        target = tmp_path / "model.gguf"
        errors: list[BaseException] = []

        def write() -> None:
            try:
                write_model(TINY, small_vocabulary(), target)
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=write) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == [] and not any(thread.is_alive() for thread in threads)
        assert list(tmp_path.iterdir()) == [target]
        assert len(GGUFReader(target).tensors) == len(tensor_plan(TINY, SMALL_VOCAB_SIZE))

    def test_the_file(self, tmp_path: Path) -> None:
        """The file holds llama.cpp's llama metadata, the vocabulary's entries and every
        tensor with its GGUF (reversed) shape and the recipe's values."""
        path = tmp_path / "model.gguf"
        write_model(TINY, small_vocabulary(), path, name="switchboard-test")
        reader = GGUFReader(path)
        expected = {
            "general.architecture": "llama",
            "general.name": "switchboard-test",
            "general.file_type": 0,
            "llama.context_length": TINY.n_ctx,
            "llama.embedding_length": 64,
            "llama.block_count": 2,
            "llama.feed_forward_length": 172,
            "llama.attention.head_count": 4,
            "llama.attention.head_count_kv": 4,
            "llama.rope.dimension_count": 16,
            "llama.vocab_size": SMALL_VOCAB_SIZE,
            "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.add_bos_token": True,
        }
        assert {key: scalar(reader, key) for key in expected} == expected
        assert scalar(reader, "llama.rope.freq_base") == pytest.approx(TINY.rope_theta)
        assert scalar(reader, "llama.attention.layer_norm_rms_epsilon") == pytest.approx(
            TINY.rms_eps
        )
        assert reader.fields["tokenizer.ggml.tokens"].contents()[:3] == ["<unk>", "<s>", "</s>"]
        tensors = {tensor.name: tensor for tensor in reader.tensors}
        plan = tensor_plan(TINY, SMALL_VOCAB_SIZE)
        assert list(tensors) == [tensor.name for tensor in plan]
        for tensor in plan:
            stored = tensors[tensor.name]
            assert tuple(stored.shape.tolist()) == tensor.shape[::-1], tensor.name
            assert np.array_equal(stored.data.reshape(tensor.shape), tensor_values(TINY, tensor))
