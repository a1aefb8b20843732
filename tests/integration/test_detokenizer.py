"""Detokenizers as their own processes: ``switchboard engine`` -> ``switchboard
detok-router`` -> 2 x ``switchboard detokenizer`` -> stand-in workers, with the text sent
straight to the workers (the default) or through ``switchboard router``."""

from __future__ import annotations

import subprocess

import pytest

from switchboard.engine import generated_token, text_token_pool
from switchboard.text import Tokenizer, load_tokenizer
from tests.integration.harness import Stack

pytestmark = pytest.mark.integration

REQUESTS = 10
TOKENS = 12


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer()


def predicted_text(tokenizer: Tokenizer, index: int) -> str:
    """What the stand-in worker's request ``index`` (prompt [1, 2, 3, index]) must read."""
    pool = text_token_pool(tokenizer.vocab_size, tokenizer.decode, tokenizer.special_token_ids)
    ids = [generated_token(pool, [1, 2, 3, index], i) for i in range(TOKENS)]
    return tokenizer.decode(ids)


class TestDetokenizers:
    @pytest.mark.parametrize("outputs_via", ["workers", "router"])
    def test_every_request_reads_the_decoded_text(
        self, stack: Stack, tokenizer: Tokenizer, outputs_via: str
    ) -> None:
        """Two workers' requests are detokenized by two detokenizers and each reads
        exactly the default tokenizer's decode of its predicted tokens."""
        router = stack.start_router()
        # Sticky per request, so both detokenizers get rows from each worker.
        detok_router = stack.start_detok_router(2, "--sticky-key", "request")
        detokenizers = [
            stack.start_detokenizer(index, 2, "--outputs-via", outputs_via) for index in (0, 1)
        ]
        stack.start_builtin_engine(wait_live=router)
        workers = [
            stack.start_worker(name, "--requests", str(REQUESTS), "--max-new-tokens", str(TOKENS))
            for name in ("w0", "w1")
        ]
        for worker in workers:
            report = worker.wait_for(
                lambda r: r["finished"] == REQUESTS, 20.0, f"{REQUESTS} requests finished"
            )
            assert report["duplicate_finishes"] == 0 and report["misdelivered"] == 0
            assert report["bad_rows"] == 0 and report["bad_messages"] == 0
            kinds = report["messages_by_kind"]
            assert "TOKEN_BATCH" not in kinds and kinds["STR_BATCH"] > 0, kinds
            for index in range(REQUESTS):
                rid = f"{worker.name}-req-{index}"
                assert report["text_by_rid"][rid] == predicted_text(tokenizer, index), rid
                assert report["finish_reasons"][rid] == {"type": "length", "length": TOKENS}
        routed = detok_router.ctl("status")["counters"]["routed_rows"]
        assert set(routed) == {"detokenizer-0", "detokenizer-1"}
        counters = router.ctl("status")["counters"]
        assert "dropped" not in counters and "rejected" not in counters
        if outputs_via == "router":
            assert sum(counters["routed_rows"].values()) == 2 * REQUESTS * TOKENS, counters
        for detokenizer in detokenizers:
            assert detokenizer.terminate(timeout=5.0) == 0
        assert not list(stack.run_dir.glob("detokenizer-*"))

    def test_bad_command_lines_fail_in_one_line(self, stack: Stack) -> None:
        for argv, message in (
            (["--run-dir", str(stack.run_dir), "--index", "2", "--count", "2"], "below --count"),
            ([], "--endpoint is required"),
            (["--run-dir", str(stack.run_dir), "--tokenizer", "/nonexistent"], "/nonexistent"),
        ):
            done = subprocess.run(
                [stack.switchboard, "detokenizer", *argv],
                check=False,
                capture_output=True,
                text=True,
            )
            assert done.returncode == 2, done
            assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
