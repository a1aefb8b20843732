"""The idle bound: a stream with no output for too long while not paused ends with a
lost abort (cause idle_timeout); a pause stops the clock."""

from __future__ import annotations

import pytest

from router_core.worker_link.errors import RequestLost
from router_core.worker_link.idle import (
    IDLE_CAUSE,
    UNREACHABLE_CAUSE,
    end_idle_streams,
    end_unreachable_streams,
)
from router_core.worker_link.streams import ResponseStream


def stream_at(rid: str, updated_at: float) -> ResponseStream:
    stream = ResponseStream(rid)
    stream.updated_at = updated_at
    return stream


class TestIdleBound:
    def test_only_streams_idle_past_the_bound_end(self) -> None:
        old, fresh = stream_at("old", 0.0), stream_at("fresh", 95.0)
        ended = end_idle_streams(
            [old, fresh], now=100.0, idle_timeout_s=60.0, paused=False, grace_s=5.0
        )
        assert ended == [old]
        assert old.finished and not fresh.finished
        (row,) = old.take_ready()
        lost = RequestLost.from_reason(row.finished_reasons[0])  # type: ignore[index]
        assert lost is not None and lost.cause == IDLE_CAUSE and lost.status == 503
        assert "60 s" in str(lost)

    def test_a_pause_restarts_every_clock(self) -> None:
        """Paused for longer than the bound: nothing ends, and the clocks start again."""
        stream = stream_at("held", 0.0)
        assert (
            end_idle_streams([stream], now=500.0, idle_timeout_s=60.0, paused=True, grace_s=5.0)
            == []
        )
        assert stream.updated_at == 500.0
        assert (
            end_idle_streams([stream], now=520.0, idle_timeout_s=60.0, paused=False, grace_s=5.0)
            == []
        )

    def test_finished_streams_are_left_alone(self) -> None:
        stream = stream_at("done", 0.0)
        stream.close({"type": "length", "length": 1})
        assert (
            end_idle_streams([stream], now=999.0, idle_timeout_s=1.0, paused=False, grace_s=5.0)
            == []
        )


class TestRequestLost:
    @pytest.mark.parametrize(
        "reason", [None, {"type": "abort", "message": "pause"}, {"type": "length", "length": 3}]
    )
    def test_other_finishes_are_not_lost(self, reason: dict[str, object] | None) -> None:
        assert reason is None or RequestLost.from_reason(reason) is None


class TestControlUnreachable:
    def test_every_unfinished_stream_ends_at_once(self) -> None:
        """A lost gateway connection ends every open stream (paused or not) with a lost
        abort of cause control_unreachable; a finished stream is left as it is."""
        running, done = stream_at("running", 99.0), stream_at("done", 0.0)
        done.finished = True
        assert end_unreachable_streams([running, done]) == [running]
        assert running.lost_cause == UNREACHABLE_CAUSE
        (row,) = running.take_ready()
        lost = RequestLost.from_reason(row.finished_reasons[0])  # type: ignore[index]
        assert lost is not None and lost.cause == UNREACHABLE_CAUSE and lost.status == 503
        assert "control host" in str(lost)
