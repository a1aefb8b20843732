"""A worker hears an output-path process restart: a stream that was producing must show
a row within the grace, or it ends (rows_lost); one still queued is left to the idle
bound; a pause stops the clock."""

from __future__ import annotations

from router_core.beacon import IncarnationBeacon
from router_core.wire import decode_message
from router_core.wire.control import UpstreamIncarnation
from router_core.wire.outputs import BatchStrOutput
from router_core.worker_link.errors import RequestLost
from router_core.worker_link.idle import end_idle_streams, suspect_streams
from router_core.worker_link.session import WorkerIdentity, WorkerSession
from router_core.worker_link.streams import ResponseStream


def producing(rid: str) -> ResponseStream:
    stream = ResponseStream(rid)
    stream.put(BatchStrOutput(rids=[rid], output_strs=["a"]))
    stream.take_ready()
    return stream


def ended(streams: list[ResponseStream], now: float, paused: bool = False) -> list[str]:
    out = end_idle_streams(streams, now=now, idle_timeout_s=60.0, paused=paused, grace_s=5.0)
    return [stream.rid for stream in out]


class TestGrace:
    def test_a_producing_stream_without_a_row_after_the_restart_ends(self) -> None:
        quiet, queued = producing("quiet"), ResponseStream("queued")
        at = quiet.updated_at + 1.0
        assert suspect_streams([quiet, queued], now=at, process="detokenizer-1") == 1
        assert ended([quiet, queued], now=at + 4.0) == []
        assert ended([quiet, queued], now=at + 5.5) == ["quiet"]
        (row,) = quiet.take_ready()
        lost = RequestLost.from_reason(row.finished_reasons[0])  # type: ignore[index]
        assert lost is not None and lost.cause == "rows_lost" and "detokenizer-1" in str(lost)
        assert quiet.lost_cause == "rows_lost" and not queued.finished

    def test_a_row_after_the_restart_clears_the_suspicion(self) -> None:
        stream = producing("busy")
        suspect_streams([stream], now=stream.updated_at, process="detokenizer-router")
        stream.put(BatchStrOutput(rids=["busy"], output_strs=["b"]))
        assert ended([stream], now=stream.updated_at + 6.0) == []
        assert stream.suspect is None

    def test_paused_time_does_not_count(self) -> None:
        stream = producing("held")
        at = stream.updated_at + 1.0
        suspect_streams([stream], now=at, process="detokenizer-0")
        assert ended([stream], now=at + 100.0, paused=True) == []
        assert ended([stream], now=at + 104.0) == []
        assert ended([stream], now=at + 105.5) == ["held"]


class TestSessionAndBeacon:
    def test_only_a_grown_incarnation_is_a_restart(self) -> None:
        session = WorkerSession(
            WorkerIdentity("w0", "ipc:///x", pid=1, host="h", version="", started_ns=1)
        )
        assert not session.on_upstream(UpstreamIncarnation("detokenizer-0", 10))  # first
        assert not session.on_upstream(UpstreamIncarnation("detokenizer-0", 10))
        assert session.on_upstream(UpstreamIncarnation("detokenizer-0", 11))
        assert not session.on_upstream(UpstreamIncarnation("detokenizer-0", 9))
        assert session.upstream == {"detokenizer-0": 11}

    def test_the_beacon_is_due_once_a_second(self) -> None:
        beacon = IncarnationBeacon("detokenizer-2", incarnation=42)
        frames = beacon.due(10.0)
        assert frames is not None
        _, (news,) = decode_message(frames)
        assert news == UpstreamIncarnation("detokenizer-2", 42)
        assert beacon.due(10.5) is None and beacon.next_due() == 11.0
        assert beacon.due(11.0) is not None
