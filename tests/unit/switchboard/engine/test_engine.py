"""Tests for the built-in engine's output rows (what the detokenizers receive)."""

from __future__ import annotations

from switchboard.engine.engine import INIT_DETOKENIZE_OFFSET, OutputOptions, token_batch
from switchboard.engine.scheduler import Sequence, StepRow

OWNER = "ipc:///tmp/sb/worker-w0"


def row(rid: str, stop: tuple[str, ...] = (), output: list[int] | None = None) -> StepRow:
    ids = output or [7, 8]
    sequence = Sequence(
        rid=rid,
        owner=OWNER,
        prompt=list(range(1, 9)),
        stop=stop,
        output_ids=list(ids),
        context=OutputOptions(no_stop_trim=True),
    )
    return StepRow(sequence=sequence, new_ids=ids[-1:])


class TestTokenBatch:
    def test_stop_holdback_is_the_longest_stop_minus_one(self) -> None:
        """Requests without stop strings are not held back; others by their longest stop."""
        batch = token_batch([row("a"), row("b", ("x",)), row("c", ("ab", "\n\n\n\n"))])
        assert batch.stop_holdback == [0, 0, 3]

    def test_rows_follow_the_incremental_shape(self) -> None:
        """decode_ids holds the prompt's tail then the output; read_offsets marks the output."""
        batch = token_batch([row("a", output=[7, 8, 9])])
        assert batch.rids == ["a"] and batch.http_worker_ipcs == [OWNER]
        assert batch.output_ids == [[9]] and batch.completion_tokens == [3]
        assert batch.decode_ids == [[4, 5, 6, 7, 8, 7, 8, 9]]
        assert batch.read_offsets == [INIT_DETOKENIZE_OFFSET]
        assert batch.no_stop_trim == [True]
