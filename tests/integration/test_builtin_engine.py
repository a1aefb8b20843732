"""The built-in engine (``switchboard engine``) as its own process, between a real
``switchboard router`` and stand-in workers, outputs routed through the router."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.engine import generated_token, text_token_pool
from switchboard.text import load_tokenizer
from tests.integration.harness import Stack, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pool() -> tuple[int, ...]:
    """The default tokenizer's token pool, as the engine builds it."""
    tokenizer = load_tokenizer()
    return text_token_pool(tokenizer.vocab_size, tokenizer.decode, tokenizer.special_token_ids)


def predicted(pool: tuple[int, ...], index: int, count: int) -> list[int]:
    """The tokens of the stand-in worker's request ``index`` (prompt [1, 2, 3, index])."""
    return [generated_token(pool, [1, 2, 3, index], i) for i in range(count)]


class TestBuiltinEngine:
    def test_every_request_gets_its_predicted_tokens(
        self, stack: Stack, pool: tuple[int, ...]
    ) -> None:
        """Two workers' 12 requests each, batched 8 at a time, all receive exactly the
        tokens the token rule predicts and finish with length; load reaches the router."""
        router = stack.start_router()
        engine = stack.start_builtin_engine(
            "--outputs-via", "router", "--max-running-requests", "8", wait_live=router
        )
        workers = [
            stack.start_worker(name, "--requests", "12", "--max-new-tokens", "5")
            for name in ("w0", "w1")
        ]
        for worker in workers:
            report = worker.wait_for(lambda r: r["finished"] == 12, 15.0, "12 requests finished")
            assert report["duplicate_finishes"] == 0 and report["misdelivered"] == 0
            assert report["bad_rows"] == 0 and report["bad_messages"] == 0
            for index in range(12):
                rid = f"{worker.name}-req-{index}"
                assert report["output_ids_by_rid"][rid] == predicted(pool, index, 5), rid
                assert report["finish_reasons"][rid] == {"type": "length", "length": 5}
            assert report["rows_by_rid"] == {f"{worker.name}-req-{i}": 5 for i in range(12)}

        def idle() -> dict[str, Any] | None:
            load = router.ctl("load")
            # A snapshot published between two steps may still show waiting requests;
            # idle means nothing running and nothing waiting.
            if load and load["running"] == 0 and load["waiting"] == 0 and load["step"] >= 5:
                return load
            return None

        load = wait_until(idle, 10.0, "an idle load snapshot")
        assert load["max_running"] == 8
        counters = router.ctl("status")["counters"]
        assert counters["forwarded"]["generate"] == 24
        assert "rejected" not in counters and "dropped" not in counters
        engine.assert_running()

    def test_pause_in_place_holds_tokens_and_continue_resumes(
        self, stack: Stack, pool: tuple[int, ...]
    ) -> None:
        """Paused in place, the engine acknowledges, keeps the request running and sends no
        tokens; after continue (also acknowledged) it finishes with all predicted tokens."""
        router = stack.start_router("--barrier-timeout", "5")
        stack.start_builtin_engine(
            "--outputs-via",
            "router",
            "--step-time",
            "0.02",
            "--load-interval",
            "0.05",
            wait_live=router,
        )
        worker = stack.start_worker("w0", "--requests", "1", "--max-new-tokens", "150")
        worker.wait_for(
            lambda r: len(r["output_ids_by_rid"].get("w0-req-0", [])) >= 2, 15.0, "some tokens"
        )
        paused = router.ctl("pause", mode="in_place")
        assert paused["complete"] and paused["acked"] == ["engine", "w0"]
        wait_until(lambda: (router.ctl("load") or {}).get("running") == 1, 10.0, "paused load")
        paused_report = worker.wait_for(lambda r: r["paused"], 10.0, "the worker paused")
        # Let snapshots taken before the pause was applied drain out of the pipeline.
        held = worker.wait_for(
            lambda r: r["loads_received"] >= paused_report["loads_received"] + 3,
            10.0,
            "load snapshots after the pause",
        )
        count = len(held["output_ids_by_rid"]["w0-req-0"])
        step = held["last_load"]["step"]
        later = worker.wait_for(
            lambda r: r["loads_received"] >= held["loads_received"] + 3,
            10.0,
            "more load snapshots while paused",
        )
        assert len(later["output_ids_by_rid"]["w0-req-0"]) == count
        assert later["last_load"]["step"] == step and later["finished"] == 0

        resumed = router.ctl("continue")
        assert resumed["complete"] and resumed["acked"] == ["engine", "w0"]
        done = worker.wait_for(lambda r: r["finished"] == 1, 30.0, "the request finished")
        assert done["output_ids_by_rid"]["w0-req-0"] == predicted(pool, 0, 150)
        assert done["finish_reasons"]["w0-req-0"] == {"type": "length", "length": 150}

    def test_engine_stops_cleanly_on_sigterm(self, stack: Stack) -> None:
        """SIGTERM stops the built-in engine with status 0 and its socket file removed."""
        router = stack.start_router()
        engine = stack.start_builtin_engine("--outputs-via", "router", wait_live=router)
        assert engine.terminate(timeout=5.0) == 0
        assert not (stack.run_dir / "engine").exists()
