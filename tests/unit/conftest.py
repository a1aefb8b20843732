"""Fixtures shared by the unit tests: a bounded zmq context and a short run directory per
test, the default tokenizer, trained once per session, and a SentencePiece-style one."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import tokenizers
import zmq
from tokenizers import decoders, models, pre_tokenizers, trainers

from switchboard.text import Tokenizer, load_tokenizer
from switchboard.text.default_tokenizer import read_corpus
from tests.support.zmq_context import bounded_context


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    """This test's own context, its sockets LINGER 0; a socket left open on it fails the
    test at teardown, named (:func:`tests.support.zmq_context.bounded_context`)."""
    with bounded_context() as ctx:
        yield ctx


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A short directory for ipc socket files (their paths are limited to ~107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="sb-unit-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def default_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The default tokenizer, trained into a session temp cache (never the user's cache)."""
    return load_tokenizer(None, cache_dir=tmp_path_factory.mktemp("switchboard-cache"))


@pytest.fixture(scope="session")
def metaspace_tokenizer() -> Tokenizer:
    """A SentencePiece-style BPE (Metaspace decoder strips the first token's space)."""
    backend = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "</s>"])
    backend.train_from_iterator([text for _, text in read_corpus()], trainer=trainer)
    return Tokenizer(backend, source="metaspace")
