"""Generated models in llama.cpp itself: they load, decode deterministically, and give a
sequence the same greedy tokens (and the same logits, to the bit) in a batch as alone;
the built-in vocabulary tokenizes as Switchboard does; ``switchboard models demo``
writes a model llama.cpp serves."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from switchboard.models import BENCH, TINY, BuiltinVocab, GGUFVocab, build_model
from switchboard.text import load_tokenizer
from tests.integration.harness import missing
from tests.support.greedy_llama import GreedyRun, greedy_decoder
from tests.support.llama_vocab import vocab_file

pytestmark = pytest.mark.integration

#: Prompts of different lengths, two ending alike (so history, not the last token
#: alone, must tell their continuations apart).
PROMPTS = (
    "The router forwards every request",
    "Once upon a time",
    "def add(a, b):\n    return",
    "Bonjour, comment allez-vous ?",
    "1, 2, 3, 4, 5,",
    "ZeroMQ sockets",
    "Pause the workers and continue",
    "A short story about a time",
)
#: Greedy steps per prompt.
STEPS = 32


@pytest.fixture(scope="module")
def llama() -> Any:
    """llama-cpp-python (the ``llama`` extra)."""
    try:
        import llama_cpp
    except ImportError:
        missing("llama-cpp-python (make llama)")
    return llama_cpp


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model cache of this module's own (never the user's)."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def tiny_model(llama: Any, model_cache: Path) -> Path:
    """TINY on llama.cpp's llama-spm vocabulary."""
    return build_model(TINY, GGUFVocab(vocab_file("llama-spm")), model_cache)


def greedy_text(llama: Any, model: Path, prompt: str, count: int) -> list[int]:
    """``count`` greedy tokens after ``prompt`` from a fresh high-level ``Llama``."""
    engine = llama.Llama(model_path=str(model), n_ctx=256, n_threads=2, verbose=False)
    try:
        tokens = engine.tokenize(prompt.encode())
        made = []
        for token in engine.generate(tokens, temp=0.0, top_k=1):
            made.append(int(token))
            if len(made) == count:
                return made
        return made
    finally:
        engine.close()


def decode_both_ways(model: Path, prompts: int, steps: int) -> tuple[GreedyRun, list[GreedyRun]]:
    """The first ``prompts`` of :data:`PROMPTS` decoded together, one sequence each,
    and each alone, in one context (unified KV cache, ``n_seq_max`` = ``prompts``)."""
    texts = [
        PROMPTS[index % len(PROMPTS)] + " " * (index // len(PROMPTS)) for index in range(prompts)
    ]
    with greedy_decoder(model, n_ctx=4096, n_seq_max=prompts) as decoder:
        tokenized = [decoder.tokenize(text) for text in texts]
        together = decoder.run(tokenized, steps)
        alone = [decoder.run([prompt], steps) for prompt in tokenized]
    return together, alone


class TestTinyModel:
    """TINY with the llama-spm vocabulary, through llama.cpp."""

    def test_deterministic_across_loads(self, llama: Any, tiny_model: Path) -> None:
        """Two loads of the model generate the same greedy tokens."""
        first = greedy_text(llama, tiny_model, PROMPTS[0], 24)
        assert len(first) == 24
        assert greedy_text(llama, tiny_model, PROMPTS[0], 24) == first

    def test_margins_stand_above_rounding(self, tiny_model: Path) -> None:
        """Over 256 greedy steps the top logit leads the next by far more than a float32
        rounding step of the largest logit (measured: the least lead is some 700 steps,
        the median 1.3 in logits up to 81)."""
        _, alone = decode_both_ways(tiny_model, 8, STEPS)
        margins = np.array([margin for run in alone for margin in run.margins])
        assert len(margins) == 8 * STEPS
        largest = max(float(np.abs(logits).max()) for run in alone for logits in run.logits)
        rounding = float(np.spacing(np.float32(largest)))
        summary = f"min {margins.min():.2e}, median {np.median(margins):.3f}, ulp {rounding:.1e}"
        assert margins.min() > 16 * rounding, summary
        assert np.median(margins) > 0.3, summary

    @pytest.mark.parametrize("prompts", [8, 32])
    def test_batched_is_alone(self, tiny_model: Path, prompts: int) -> None:
        """Prompts decoded together, one sequence each, give the tokens and the very
        logits each gives alone, for 32 steps; their continuations differ."""
        together, alone = decode_both_ways(tiny_model, prompts, STEPS)
        assert together.tokens == [run.tokens[0] for run in alone]
        assert all(np.array_equal(*pair) for pair in _by_step(together, alone))
        assert len({tuple(tokens) for tokens in together.tokens}) == prompts


def _by_step(together: GreedyRun, alone: list[GreedyRun]) -> Iterator[tuple[Any, Any]]:
    """(batched, alone) logits of each sequence at each step."""
    count = len(alone)
    for step, logits in enumerate(together.logits):
        yield logits, alone[step % count].logits[step // count]


class TestBuiltinVocabulary:
    """Switchboard's built-in tokenizer as a GGUF vocabulary, in llama.cpp."""

    def test_tokenizes_as_switchboard(self, llama: Any, model_cache: Path, tmp_path: Path) -> None:
        """llama.cpp loads it, encodes varied text to Switchboard's own ids, and decodes
        them back to the text."""
        tokenizer_cache = tmp_path / "tokenizer"
        model = build_model(TINY, BuiltinVocab(tokenizer_cache), model_cache)
        ours = load_tokenizer(None, cache_dir=tokenizer_cache)
        engine = llama.Llama(model_path=str(model), vocab_only=True, verbose=False)
        try:
            for text in (
                "Hello, world! It's 2024; the router's   sockets hum.\n\tTabs and  spaces  ",
                "ünïcödé, 日本語のテキスト, Ελληνικά, русский текст, emoji 🎉🚀",
                "def f(x):\n    return x ** 2  # squares, 3.14159 and $100 & 50%",
            ):
                ids = engine.tokenize(text.encode(), add_bos=False, special=False)
                assert ids == ours.encode(text), text
                assert engine.detokenize(ids).decode() == text
            assert engine.token_eos() == ours.eos_token_id
        finally:
            engine.close()


class TestDemoCommand:
    """``switchboard models demo`` through the real command line."""

    def test_demo_serves(self, llama: Any, switchboard_bin: str, tmp_path: Path) -> None:
        """The demo command writes the file it names and the command serving it; llama.cpp
        loads the file and generates text from it."""
        out = tmp_path / "demo.gguf"
        env = {**os.environ, "SWITCHBOARD_CACHE_DIR": str(tmp_path / "cache")}
        done = subprocess.run(
            [switchboard_bin, "models", "demo", "--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith(f"model: {out} (tiny, ")
        assert lines[1] == f"serve it: switchboard up --engine llama-cpp --model {out}"
        engine = llama.Llama(model_path=str(out), n_ctx=256, n_threads=2, verbose=False)
        try:
            made = engine.create_completion("Hello", max_tokens=8, temperature=0.0)
            assert made["usage"]["completion_tokens"] >= 1
        finally:
            engine.close()


class TestBenchModel:
    """BENCH builds in seconds, is the size of a small real model, and batches exactly."""

    def test_bench(self, llama: Any, tmp_path: Path) -> None:
        """BENCH on llama-spm: built well under 20 s, 58 M parameters in 233 MB; four
        prompts batched give the logits each gives alone."""
        started = time.perf_counter()
        model = build_model(BENCH, GGUFVocab(vocab_file("llama-spm")), tmp_path)
        elapsed = time.perf_counter() - started
        try:
            assert elapsed < 20, f"BENCH took {elapsed:.1f} s to build"
            assert round(model.stat().st_size / 1e6) == 233
            together, alone = decode_both_ways(model, 4, 4)
            assert together.tokens == [run.tokens[0] for run in alone]
            assert all(np.array_equal(*pair) for pair in _by_step(together, alone))
        finally:
            model.unlink()
