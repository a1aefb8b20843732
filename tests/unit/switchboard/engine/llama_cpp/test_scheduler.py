"""The llama.cpp scheduler on a real model: batching, pauses, the KV cache, sampling.

Every expectation of tokens comes from llama-cpp-python's own ``Llama`` decoding each
prompt alone (:class:`tests.support.llama_models.GreedyReference`), never from the
scheduler under test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from router_core.wire.requests import SamplingParams
from switchboard.engine.llama_cpp.config import LlamaConfig
from switchboard.engine.llama_cpp.runtime import LlamaRuntime
from switchboard.engine.llama_cpp.scheduler import NO_EMBEDDINGS, LlamaScheduler
from switchboard.engine.sequences import Sequence, StepResult
from tests.support.llama_models import GreedyReference, tiny_model

pytestmark = pytest.mark.integration

GREEDY = SamplingParams(temperature=0.0)
#: Prompts of 2 to 40 tokens (BOS first), so that some need several prefill chunks.
PROMPTS = [[1, *range(300 + 11 * i, 300 + 11 * i + 1 + 3 * i)] for i in range(14)]


@pytest.fixture(scope="module")
def reference() -> Iterator[GreedyReference]:
    ref = GreedyReference(tiny_model())
    yield ref
    ref.close()


@pytest.fixture(scope="module")
def runtime() -> Iterator[LlamaRuntime]:
    config = LlamaConfig(context_size=2048, batch_size=32, sequences=8, threads=1)
    with LlamaRuntime(tiny_model(), config) as loaded:
        yield loaded


@pytest.fixture
def scheduler(runtime: LlamaRuntime) -> Iterator[LlamaScheduler]:
    made = LlamaScheduler(runtime, runtime.config)
    yield made
    made.close()
    assert made.kv_cells_used() == 0 or made.slots, "cells held with no request running"


def request(rid: str, prompt: list[int], count: int = 16, **params: object) -> Sequence:
    sampling = SamplingParams(**{"temperature": 0.0, **params})  # type: ignore[arg-type]
    return Sequence(
        rid, "w0", list(prompt), max_new_tokens=count, sampling=sampling, ignore_eos=True
    )


def run(
    scheduler: LlamaScheduler, limit: int = 2000
) -> tuple[dict[str, list[int]], dict[str, object]]:
    """Step until idle: each request's tokens as its rows sent them, and how it ended."""
    tokens: dict[str, list[int]] = {}
    ended: dict[str, object] = {}
    for _ in range(limit):
        if scheduler.next_step_at() is None:
            break
        collect(scheduler.step(0.0), tokens, ended)
    return tokens, ended


def collect(result: StepResult, tokens: dict[str, list[int]], ended: dict[str, object]) -> None:
    for row in result.rows:
        tokens.setdefault(row.sequence.rid, []).extend(row.new_ids)
        if row.finished is not None:
            ended[row.sequence.rid] = row.finished


class TestContinuousBatching:
    def test_batched_greedy_tokens_equal_each_prompt_decoded_alone(
        self, scheduler: LlamaScheduler, reference: GreedyReference
    ) -> None:
        """14 prompts (more than the 8 sequences, prefilled in chunks of a 32-token
        budget) each get exactly the tokens llama.cpp gives the prompt alone."""
        for index, prompt in enumerate(PROMPTS):
            scheduler.admit(request(f"r{index}", prompt, count=20))
        tokens, ended = run(scheduler)
        for index, prompt in enumerate(PROMPTS):
            assert tokens[f"r{index}"] == reference.tokens(prompt, 20), f"r{index}"
            assert ended[f"r{index}"] == {"type": "length", "length": 20}
        assert scheduler.kv_cells_used() == 0

    def test_requests_joining_between_steps_stay_exact(
        self, scheduler: LlamaScheduler, reference: GreedyReference
    ) -> None:
        """Requests admitted while others decode change no one's tokens."""
        tokens: dict[str, list[int]] = {}
        ended: dict[str, object] = {}
        for index, prompt in enumerate(PROMPTS[:4]):
            scheduler.admit(request(f"a{index}", prompt))
        for step in range(6):
            collect(scheduler.step(0.0), tokens, ended)
            scheduler.admit(request(f"b{step}", PROMPTS[4 + step]))
        more, _ = run(scheduler)
        for rid, ids in more.items():
            tokens.setdefault(rid, []).extend(ids)
        for index in range(4):
            assert tokens[f"a{index}"] == reference.tokens(PROMPTS[index], 16)
        for step in range(6):
            assert tokens[f"b{step}"] == reference.tokens(PROMPTS[4 + step], 16)

    def test_one_decode_step_carries_every_running_request(self, scheduler: LlamaScheduler) -> None:
        """Once prefilled, a step advances every running request by one token."""
        for index in range(8):
            scheduler.admit(request(f"r{index}", [1, 400 + index, 401 + index], count=10))
        first = scheduler.step(0.0)  # 24 prompt tokens fit one 32-token step
        second = scheduler.step(0.0)
        assert len(first.rows) == 8 and first.prefill_tokens == 24
        assert len(second.rows) == 8 and second.decode_tokens == 8
        run(scheduler)


class TestPauseModes:
    @pytest.mark.parametrize("mode", ["in_place", "retract"])
    def test_a_paused_and_continued_stream_is_unchanged(
        self, scheduler: LlamaScheduler, reference: GreedyReference, mode: str
    ) -> None:
        """Paused mid-stream and continued, each request's tokens equal an unpaused run."""
        tokens: dict[str, list[int]] = {}
        ended: dict[str, object] = {}
        for index, prompt in enumerate(PROMPTS[:6]):
            scheduler.admit(request(f"r{index}", prompt, count=24))
        for _ in range(5):
            collect(scheduler.step(0.0), tokens, ended)
        held = scheduler.kv_cells_used()
        assert scheduler.pause(mode).rows == []  # type: ignore[arg-type]
        assert scheduler.next_step_at() is None
        assert scheduler.step(0.0).rows == []
        if mode == "retract":
            assert scheduler.kv_cells_used() == 0 and len(scheduler.waiting) == 6
        else:
            assert scheduler.kv_cells_used() == held and len(scheduler.slots) > 0
        scheduler.resume()
        more, _ = run(scheduler)
        for rid, ids in more.items():
            tokens.setdefault(rid, []).extend(ids)
        for index, prompt in enumerate(PROMPTS[:6]):
            assert tokens[f"r{index}"] == reference.tokens(prompt, 24), f"r{index}"

    def test_abort_mode_ends_every_request_and_frees_the_cache(
        self, scheduler: LlamaScheduler
    ) -> None:
        """An abort-mode pause ends running and waiting requests with abort rows."""
        for index, prompt in enumerate(PROMPTS[:10]):
            scheduler.admit(request(f"r{index}", prompt))
        scheduler.step(0.0)
        result = scheduler.pause("abort")
        assert sorted(row.sequence.rid for row in result.rows) == sorted(
            f"r{index}" for index in range(10)
        )
        assert all(row.finished == {"type": "abort", "message": "paused"} for row in result.rows)
        assert scheduler.kv_cells_used() == 0 and not scheduler.waiting
        scheduler.resume()

    def test_an_aborted_request_frees_its_cells_and_others_go_on(
        self, scheduler: LlamaScheduler, reference: GreedyReference
    ) -> None:
        """Aborting one request frees its KV cells at once; the others stay exact."""
        for index, prompt in enumerate(PROMPTS[:3]):
            scheduler.admit(request(f"r{index}", prompt))
        tokens: dict[str, list[int]] = {}
        ended: dict[str, object] = {}
        collect(scheduler.step(0.0), tokens, ended)
        before = scheduler.kv_cells_used()
        aborted = scheduler.abort("w0", "r1")
        assert [row.finished for row in aborted.rows] == [{"type": "abort", "message": "client"}]
        assert scheduler.kv_cells_used() == before - len(PROMPTS[1])
        more, _ = run(scheduler)
        for rid, ids in more.items():
            tokens.setdefault(rid, []).extend(ids)
        assert tokens["r0"] == reference.tokens(PROMPTS[0], 16)
        assert tokens["r2"] == reference.tokens(PROMPTS[2], 16)


class TestFullCache:
    def test_a_full_kv_cache_makes_requests_wait_and_stays_exact(
        self, reference: GreedyReference
    ) -> None:
        """With room for about three requests at a time, 12 requests all complete with
        their exact tokens: the rest wait, or are preempted and prefilled again."""
        config = LlamaConfig(context_size=256, batch_size=64, sequences=8, threads=1)
        with LlamaRuntime(tiny_model(), config) as small:
            scheduler = LlamaScheduler(small, config)
            prompts = [[1, *range(500 + 40 * i, 540 + 40 * i)] for i in range(12)]
            for index, prompt in enumerate(prompts):
                scheduler.admit(request(f"r{index}", prompt, count=40))
            tokens, ended = run(scheduler)
            for index, prompt in enumerate(prompts):
                assert tokens[f"r{index}"] == reference.tokens(prompt, 40), f"r{index}"
                assert ended[f"r{index}"] == {"type": "length", "length": 40}
            assert scheduler.kv_cells_used() == 0
            scheduler.close()


class TestSampling:
    def test_a_seed_makes_sampling_repeatable(self, scheduler: LlamaScheduler) -> None:
        """The same seed gives the same tokens; another seed different ones."""
        hot = {"temperature": 1.5, "top_k": 40, "top_p": 0.95, "min_p": 0.01}
        for rid, seed in (("a", 7), ("b", 7), ("c", 8)):
            scheduler.admit(request(rid, PROMPTS[3], count=24, seed=seed, **hot))
        tokens, _ = run(scheduler)
        assert tokens["a"] == tokens["b"]
        assert tokens["a"] != tokens["c"]

    def test_penalties_change_what_greedy_repeats(
        self, scheduler: LlamaScheduler, reference: GreedyReference
    ) -> None:
        """A repetition penalty changes a greedy continuation that repeats tokens (the
        tiny model's greedy margins, about 2.5 logits, outweigh an additive penalty of 2
        at its one repeat)."""
        plain = reference.tokens(PROMPTS[5], 32)
        assert len(set(plain)) < len(plain), "the reference continuation never repeats"
        scheduler.admit(request("p", PROMPTS[5], count=32, repetition_penalty=2.0))
        tokens, _ = run(scheduler)
        assert tokens["p"] != plain
        assert len(set(tokens["p"])) > len(set(plain))

    def test_logit_bias_bans_and_forces_tokens(
        self, scheduler: LlamaScheduler, reference: GreedyReference
    ) -> None:
        """-100 on the greedy first token makes greedy choose another; +100 on a token
        makes greedy choose it every step; a bias of 0 changes nothing."""
        plain = reference.tokens(PROMPTS[4], 8)
        forced = next(t for t in range(100, 200) if t not in plain)
        scheduler.admit(request("ban", PROMPTS[4], count=8, logit_bias={plain[0]: -100.0}))
        scheduler.admit(request("force", PROMPTS[4], count=8, logit_bias={forced: 100.0}))
        scheduler.admit(request("zero", PROMPTS[4], count=8, logit_bias={plain[0]: 0.0}))
        tokens, _ = run(scheduler)
        assert tokens["ban"][0] != plain[0]
        assert tokens["force"] == [forced] * 8
        assert tokens["zero"] == plain

    def test_stop_token_ids_and_stop_strings_end_a_request(
        self, scheduler: LlamaScheduler, reference: GreedyReference
    ) -> None:
        """A stop token id ends the request at that token (kept in the output); a stop
        string ends it once the output's text holds it."""
        expected = reference.tokens(PROMPTS[2], 16)
        stop_at = expected[5]
        first = expected.index(stop_at)
        scheduler.admit(
            Sequence(
                "ids",
                "w0",
                PROMPTS[2],
                max_new_tokens=16,
                sampling=GREEDY,
                stop_token_ids=frozenset({stop_at}),
            )
        )
        text = scheduler.runtime.detokenize(expected[:4])
        scheduler.admit(
            Sequence(
                "str",
                "w0",
                PROMPTS[2],
                max_new_tokens=16,
                sampling=GREEDY,
                stop=(text[-3:],),
                ignore_eos=True,
            )
        )
        tokens, ended = run(scheduler)
        assert tokens["ids"] == expected[: first + 1]
        assert ended["ids"] == {"type": "stop", "matched": stop_at}
        assert ended["str"] == {"type": "stop", "matched": text[-3:]}
        assert len(tokens["str"]) <= 4

    def test_logprobs_are_returned_when_asked(self, scheduler: LlamaScheduler) -> None:
        """Each greedy token comes with its log probability, the best of its top 3."""
        asked = request("lp", PROMPTS[1], count=4)
        asked.logprobs = 3
        scheduler.admit(asked)
        rows = []
        while scheduler.next_step_at() is not None:
            rows += scheduler.step(0.0).rows
        entries = [entry for row in rows for entry in row.logprobs or []]
        assert len(entries) == 4
        for (chosen, top_ids, top_values), row in zip(entries, rows, strict=True):
            assert chosen <= 0 and len(top_ids) == 3
            assert top_ids[0] == row.new_ids[0] and top_values[0] == pytest.approx(chosen)
            assert list(top_values) == sorted(top_values, reverse=True)


class TestRefusals:
    def test_embeddings_and_prompts_beyond_the_context_are_refused(
        self, scheduler: LlamaScheduler
    ) -> None:
        """An embedding request, or a prompt as long as the context, ends at admission."""
        embed = scheduler.admit(Sequence("e", "w0", [1, 2, 3], embedding=True))
        assert embed.rows[0].finished == {"type": "abort", "message": NO_EMBEDDINGS}
        long = scheduler.admit(request("l", [1] * scheduler.runtime.n_ctx))
        message = long.rows[0].finished["message"]  # type: ignore[index]
        assert f"({scheduler.runtime.n_ctx} tokens)" in message
        assert f"length of {scheduler.runtime.n_ctx} tokens" in message
        vocab = scheduler.runtime.n_vocab
        outside = scheduler.admit(request("b", [1, 2], logit_bias={vocab: 1.0}))
        assert outside.rows[0].finished == {
            "type": "abort",
            "message": f"logit_bias: token {vocab} is not in the model's vocabulary of "
            f"{vocab} tokens",
        }


class TestLoad:
    def test_load_reports_real_state(self, scheduler: LlamaScheduler) -> None:
        """Running, waiting, KV cells, throughput and context length from real state."""
        for index, prompt in enumerate(PROMPTS[:10]):
            scheduler.admit(request(f"r{index}", prompt))
        scheduler.step(0.0)
        load = scheduler.load()
        assert (load.running, load.waiting, load.max_running) == (8, 2, 8)
        assert load.kv_cells_used == scheduler.kv_cells_used() > 0
        assert load.kv_cells_total == load.context_length == scheduler.runtime.n_ctx
        assert load.tokens_per_s > 0 and load.step == 1
        run(scheduler)
        assert scheduler.load().kv_cells_used == 0
