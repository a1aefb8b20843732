"""The built-in engine's scheduler: continuous batching, the token rule, stops, aborts, pauses."""

from __future__ import annotations

import math

import pytest

from router_core.wire.finish import lost_reason
from switchboard.engine import (
    Scheduler,
    SchedulerConfig,
    Sequence,
    StepResult,
    embedding_for,
    generated_token,
)

POOL = tuple(range(10, 110))  # 100 ids


def predicted(prompt: list[int], count: int, seed: int = 0) -> list[int]:
    """The token rule of docs/engine.md, written out independently of the engine."""
    return [POOL[(sum(prompt) * 31 + i * 7919 + seed) % len(POOL)] for i in range(count)]


def make(**overrides: object) -> Scheduler:
    config = SchedulerConfig(token_pool=POOL, **overrides)  # type: ignore[arg-type]
    return Scheduler(config)


def seq(rid: str, prompt: list[int] | None = None, owner: str = "w0", **kw: object) -> Sequence:
    return Sequence(rid, owner, prompt if prompt is not None else [1, 2, 3], **kw)  # type: ignore[arg-type]


def run_to_end(scheduler: Scheduler, limit: int = 1000) -> dict[str, list[int]]:
    """Step until idle; the output ids each request was sent, by rid."""
    out: dict[str, list[int]] = {}
    for _ in range(limit):
        if scheduler.next_step_at() is None:
            break
        for row in scheduler.step(0.0).rows:
            out.setdefault(row.sequence.rid, []).extend(row.new_ids)
    return out


def finishes(result: StepResult) -> dict[str, object]:
    return {row.sequence.rid: row.finished for row in result.rows if row.finished is not None}


class TestTokenRule:
    def test_tokens_follow_the_documented_rule(self) -> None:
        """Each output token is pool[(sum(prompt)*31 + i*7919 + seed) % len(pool)]."""
        scheduler = make(vocab_seed=5)
        scheduler.admit(seq("a", [4, 9], max_new_tokens=6))
        assert run_to_end(scheduler)["a"] == predicted([4, 9], 6, seed=5)
        assert [generated_token(POOL, [4, 9], i, 5) for i in range(6)] == predicted([4, 9], 6, 5)

    def test_embeddings_are_deterministic_unit_vectors(self) -> None:
        """An embedding request finishes in one step with the predicted unit vector."""
        scheduler = make(embedding_dimension=16)
        scheduler.admit(seq("e", [3, 1], embedding=True))
        (row,) = scheduler.step(0.0).rows
        assert row.finished == {"type": "stop", "matched": None}
        assert row.embedding == embedding_for([3, 1], 16) != embedding_for([1, 3], 16)
        assert math.isclose(sum(v * v for v in row.embedding), 1.0)
        assert scheduler.next_step_at() is None and not scheduler.running


class TestContinuousBatching:
    def test_running_batch_is_capped(self) -> None:
        """At most max_running_requests run; the rest wait FIFO and join as others finish."""
        scheduler = make(max_running_requests=2)
        for i in range(3):
            scheduler.admit(seq(f"r{i}", max_new_tokens=2 + i))
        first = scheduler.step(0.0)
        assert [row.sequence.rid for row in first.rows] == ["r0", "r1"]
        assert [s.rid for s in scheduler.waiting] == ["r2"]
        second = scheduler.step(0.0)
        assert finishes(second) == {"r0": {"type": "length", "length": 2}}
        third = scheduler.step(0.0)
        assert [row.sequence.rid for row in third.rows] == ["r1", "r2"]

    def test_token_budget_limits_prefill(self) -> None:
        """Admission stops when the step budget (decode 1 each + prompt lengths) is spent."""
        scheduler = make(max_tokens_per_step=10)
        for rid in ("a", "b", "c"):
            scheduler.admit(seq(rid, [1] * 4, max_new_tokens=5))
        first = scheduler.step(0.0)
        assert (first.prefill_tokens, first.decode_tokens) == (8, 0)
        assert list(scheduler.running) == [("w0", "a"), ("w0", "b")]
        second = scheduler.step(0.0)  # 2 decode + 4 prefill fits in 10
        assert (second.prefill_tokens, second.decode_tokens) == (4, 2)
        assert len(scheduler.running) == 3

    def test_oversized_prompt_is_admitted_alone(self) -> None:
        """A prompt larger than the whole budget still runs, alone in an empty batch."""
        scheduler = make(max_tokens_per_step=4)
        scheduler.admit(seq("big", [1] * 9, max_new_tokens=1))
        scheduler.admit(seq("small", [1], max_new_tokens=1))
        assert finishes(scheduler.step(0.0)) == {"big": {"type": "length", "length": 1}}
        assert finishes(scheduler.step(0.0)) == {"small": {"type": "length", "length": 1}}

    def test_step_timing(self) -> None:
        """The next step is due step_time + per_token_cost * tokens after this one."""
        scheduler = make(step_time_s=0.01, per_token_cost_s=0.001)
        assert scheduler.next_step_at() is None
        scheduler.admit(seq("a", [1] * 5, max_new_tokens=3))
        assert scheduler.next_step_at() == 0.0
        scheduler.step(100.0)
        assert scheduler.next_step_at() == pytest.approx(100.0 + 0.01 + 0.005)
        scheduler.step(200.0)
        assert scheduler.next_step_at() == pytest.approx(200.0 + 0.01 + 0.001)

    def test_duplicate_request_is_refused(self) -> None:
        """A second request with an in-flight (owner, rid) is refused without a row and
        counted; the same rid of another owner is another request."""
        scheduler = make()
        assert scheduler.admit(seq("a")).rows == [] and scheduler.admit(seq("a")).rows == []
        assert scheduler.admit(seq("a", owner="w1")).rows == [] and scheduler.duplicates == 1
        assert [(s.owner, s.rid) for s in scheduler.waiting] == [("w0", "a"), ("w1", "a")]


class TestWaitingBound:
    """At most max_waiting_requests wait; what waits is found by key, not by a scan."""

    def test_config_bound_is_positive(self) -> None:
        """max_waiting_requests defaults to 65 536 and must be > 0."""
        assert SchedulerConfig(token_pool=POOL).max_waiting_requests == 65_536
        with pytest.raises(ValueError, match="max_waiting_requests"):
            SchedulerConfig(token_pool=POOL, max_waiting_requests=0)

    def test_full_queue_aborts_the_new_request_at_once(self) -> None:
        """Beyond the bound a request gets one abort row saying the queue is full, is
        counted, and is not kept; once the queue shrinks, requests are queued again."""
        scheduler = make(max_waiting_requests=2, max_running_requests=1)
        assert scheduler.admit(seq("a")).rows == [] and scheduler.admit(seq("b")).rows == []
        refused = scheduler.admit(seq("c"))
        message = "the engine's waiting queue is full (2 waiting); retry later"
        assert finishes(refused) == {"c": lost_reason("engine_queue_full", message)}
        assert refused.rows[0].new_ids == [] and refused.rows[0].sequence.rid == "c"
        assert scheduler.queue_full == 1 and ("w0", "c") not in scheduler
        assert [s.rid for s in scheduler.waiting] == ["a", "b"]
        assert scheduler.load().waiting == 2
        scheduler.step(0.0)  # a runs: one place frees
        assert scheduler.admit(seq("c")).rows == [] and scheduler.queue_full == 1
        assert [s.rid for s in scheduler.waiting] == ["b", "c"]

    def test_duplicate_of_a_full_queue_is_not_aborted(self) -> None:
        """A duplicate is refused without a row even when the queue is full: an abort row
        would end the stream of the request already in flight."""
        scheduler = make(max_waiting_requests=1)
        scheduler.admit(seq("a"))
        assert scheduler.admit(seq("a")).rows == []
        assert (scheduler.duplicates, scheduler.queue_full) == (1, 0)

    def test_keys_follow_the_queue(self) -> None:
        """Whether a request is in flight stays right through each way it moves: admitted,
        run, retracted, aborted while waiting, finished."""
        scheduler = make(max_running_requests=1)
        for rid in ("a", "b", "c"):
            scheduler.admit(seq(rid, max_new_tokens=2))
        assert all(("w0", rid) in scheduler.waiting for rid in "abc")
        scheduler.step(0.0)
        assert ("w0", "a") not in scheduler.waiting and ("w0", "a") in scheduler
        scheduler.pause("retract")
        assert ("w0", "a") in scheduler.waiting
        assert set(finishes(scheduler.abort("w0", "b"))) == {"b"}
        assert ("w0", "b") not in scheduler and scheduler.admit(seq("b")).rows == []
        scheduler.resume()
        run_to_end(scheduler)
        assert not any(("w0", rid) in scheduler for rid in "abc")
        assert len(scheduler.waiting) == 0 and scheduler.duplicates == 0

    def test_outputs_within_the_bound_are_unchanged(self) -> None:
        """A queue exactly as long as the bound runs to the same tokens as the default."""
        prompts = {f"r{i}": [i, 2 * i + 1] for i in range(40)}

        def outputs(**limits: object) -> tuple[dict[str, list[int]], int]:
            scheduler = make(max_running_requests=4, **limits)
            for rid, prompt in prompts.items():
                assert scheduler.admit(seq(rid, prompt, max_new_tokens=3)).rows == []
            return run_to_end(scheduler), scheduler.queue_full

        bounded, refused = outputs(max_waiting_requests=len(prompts))
        assert refused == 0 and bounded == outputs()[0]
        assert bounded == {rid: predicted(prompt, 3) for rid, prompt in prompts.items()}


class TestFinishing:
    def test_max_new_tokens_gives_length(self) -> None:
        """A request gets exactly max_new_tokens tokens, then finishes with length."""
        scheduler = make()
        scheduler.admit(seq("a", max_new_tokens=3))
        results = [scheduler.step(0.0) for _ in range(3)]
        assert [r.rows[0].finished for r in results] == [
            None,
            None,
            {"type": "length", "length": 3},
        ]
        assert scheduler.next_step_at() is None

    def test_stop_token(self) -> None:
        """A generated stop token id finishes the request with matched = that id."""
        tokens = predicted([1, 2, 3], 5)
        scheduler = make()
        scheduler.admit(seq("a", stop_token_ids=frozenset({tokens[2]}), max_new_tokens=5))
        out = [scheduler.step(0.0) for _ in range(3)]
        assert out[2].rows[0].finished == {"type": "stop", "matched": tokens[2]}
        assert scheduler.next_step_at() is None

    def test_eos_unless_ignore_eos(self) -> None:
        """EOS (when the pool yields it) stops a request unless it ignores EOS."""
        eos = predicted([1, 2, 3], 2)[1]
        scheduler = make(eos_token_id=eos)
        scheduler.admit(seq("a", max_new_tokens=4))
        scheduler.admit(seq("b", max_new_tokens=4, ignore_eos=True))
        scheduler.step(0.0)
        assert finishes(scheduler.step(0.0)) == {"a": {"type": "stop", "matched": eos}}

    def test_min_new_tokens_delays_stop(self) -> None:
        """Stop conditions are not checked before min_new_tokens."""
        tokens = predicted([1, 2, 3], 4)
        scheduler = make()
        scheduler.admit(seq("a", stop_token_ids=frozenset({tokens[0]}), min_new_tokens=2))
        assert run_to_end(scheduler, limit=3)["a"] == tokens[:3]

    def test_stop_string_spanning_tokens(self) -> None:
        """A stop string split across two tokens' text finishes with matched = the string."""
        tokens = predicted([1, 2, 3], 6)
        words = {token: f"<{token}>" for token in POOL}
        stop = f"{tokens[2]}><{tokens[3]}"  # the end of token 2 and the start of token 3
        scheduler = Scheduler(
            SchedulerConfig(token_pool=POOL), decode=lambda ids: "".join(words[i] for i in ids)
        )
        scheduler.admit(seq("a", stop=(stop,), max_new_tokens=6))
        results = [scheduler.step(0.0) for _ in range(4)]
        assert [r.rows[0].new_ids[0] for r in results] == tokens[:4]
        assert [r.rows[0].finished for r in results][2:] == [
            None,
            {"type": "stop", "matched": stop},
        ]
        assert scheduler.next_step_at() is None

    def test_abort_one(self) -> None:
        """abort finishes one request, running or waiting, and leaves the others."""
        scheduler = make(max_running_requests=1)
        scheduler.admit(seq("a"))
        scheduler.admit(seq("b"))
        scheduler.step(0.0)
        result = scheduler.abort("w0", "b", "client")
        assert finishes(result) == {"b": {"type": "abort", "message": "client"}}
        assert finishes(scheduler.abort("w0", "a")) == {"a": {"type": "abort", "message": "client"}}
        assert scheduler.abort("w0", "nope").rows == [] and scheduler.next_step_at() is None

    def test_abort_all_of_one_owner(self) -> None:
        """abort_all finishes every request of that owner only."""
        scheduler = make(max_running_requests=1)
        for rid, owner in (("a", "w0"), ("b", "w1"), ("c", "w0")):
            scheduler.admit(seq(rid, owner=owner))
        scheduler.step(0.0)
        assert set(finishes(scheduler.abort_all("w0"))) == {"a", "c"}
        assert [s.rid for s in scheduler.waiting] == ["b"] and not scheduler.running


class TestPause:
    def test_abort_mode_ends_everything_in_flight(self) -> None:
        """pause(abort) finishes waiting and running requests with abort; nothing steps."""
        scheduler = make(max_running_requests=1)
        scheduler.admit(seq("a"))
        scheduler.admit(seq("b"))
        scheduler.step(0.0)
        result = scheduler.pause("abort")
        assert finishes(result) == {r: {"type": "abort", "message": "paused"} for r in "ab"}
        scheduler.admit(seq("c", max_new_tokens=1))
        assert scheduler.step(0.0).rows == [] and scheduler.next_step_at() is None
        scheduler.resume()
        assert finishes(scheduler.step(0.0)) == {"c": {"type": "length", "length": 1}}

    def test_retract_gives_the_same_tokens_as_an_unpaused_run(self) -> None:
        """pause(retract) puts the running batch back at the head of the queue, keeping its
        tokens; after resume every request ends with the tokens of an unpaused run."""
        prompts = {f"r{i}": [i, i + 1, 2 * i] for i in range(4)}

        def fresh() -> Scheduler:
            scheduler = make(max_running_requests=2)
            for rid, prompt in prompts.items():
                scheduler.admit(seq(rid, prompt, max_new_tokens=5))
            return scheduler

        plain = run_to_end(fresh())
        paused = fresh()
        early: dict[str, list[int]] = {}
        for _ in range(2):
            for row in paused.step(0.0).rows:
                early.setdefault(row.sequence.rid, []).extend(row.new_ids)
        assert paused.pause("retract").rows == []
        assert not paused.running and [s.rid for s in paused.waiting] == ["r0", "r1", "r2", "r3"]
        assert paused.waiting[0].retractions == 1 and paused.waiting[0].output_ids
        assert paused.step(0.0).rows == []
        paused.resume()
        late = run_to_end(paused)
        joined = {rid: early.get(rid, []) + late.get(rid, []) for rid in prompts}
        assert joined == plain == {rid: predicted(p, 5) for rid, p in prompts.items()}

    def test_in_place_freezes_and_resumes_where_it_was(self) -> None:
        """pause(in_place) keeps every request as it is, produces no tokens while paused,
        and resume continues from the next token."""
        scheduler = make()
        scheduler.admit(seq("a", max_new_tokens=4))
        first = scheduler.step(0.0).rows[0].new_ids
        assert scheduler.pause("in_place").rows == []
        scheduler.admit(seq("b", max_new_tokens=1))
        for _ in range(3):
            assert scheduler.step(0.0).rows == []
        assert scheduler.next_step_at() is None and list(scheduler.running) == [("w0", "a")]
        scheduler.resume()
        out = run_to_end(scheduler)
        assert first + out["a"] == predicted([1, 2, 3], 4) and len(out["b"]) == 1


class TestLoad:
    def test_load_snapshot_numbers(self) -> None:
        """load() reports running, waiting, max_running, the last step's share of the
        token budget, and the step count."""
        scheduler = make(max_running_requests=2, max_tokens_per_step=20)
        for rid in "abc":
            scheduler.admit(seq(rid, [1] * 4))
        before = scheduler.load()
        assert (before.running, before.waiting, before.max_running, before.step) == (0, 3, 2, 0)
        scheduler.step(0.0)
        after = scheduler.load()
        assert (after.running, after.waiting, after.step) == (2, 1, 1)
        assert after.token_usage == pytest.approx(8 / 20)
