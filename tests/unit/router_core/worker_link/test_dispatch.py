"""Tests for the worker link's inbound dispatch, without sockets: which messages
router_core.inbound.accept lets through under the worker's frame-count rule (and the
reason counted for each one it refuses), the control table by payload struct type, and
rows delivered to their request's stream."""

from __future__ import annotations

import gc

import msgspec
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router_core.counters import Counters
from router_core.inbound import accept
from router_core.transport import FrameLike
from router_core.wire import Header, Kind, decode_header, encode_header, frame_batch, frame_message
from router_core.wire.codec import Frames
from router_core.wire.control import (
    DrainCommand,
    FreezeGC,
    Heartbeat,
    LoadSnapshot,
    PauseContinueBroadcast,
    RegistrationReply,
    UpstreamIncarnation,
)
from router_core.wire.finish import lost_reason
from router_core.wire.outputs import BatchStrOutput
from router_core.wire.requests import GenerateRequest
from router_core.worker_link import RECEIVE_SPAN, ResponseStream, WorkerIdentity, WorkerSession
from router_core.worker_link.dispatch import (
    ENGINE_RESTARTED,
    InboundDispatch,
    handlers_by_kind,
    worker_frame_count,
)
from tests.unit.router_core.recorded_spans import SAMPLED

ADDRESS = "ipc:///tmp/sb-unit/worker-w0"


class Observed(list[tuple[float | None, int, int]]):
    """The calls an outputs observer got, in order."""

    def __call__(self, latency_s: float | None, rows: int, nbytes: int) -> None:
        self.append((latency_s, rows, nbytes))


class Harness:
    """A dispatch over a fresh session, with what it sends and signals recorded."""

    def __init__(self) -> None:
        identity = WorkerIdentity("w0", ADDRESS, pid=1, host="", version="", started_ns=0)
        self.session = WorkerSession(identity)
        self.streams: dict[str, ResponseStream] = {}
        self.counters = Counters()
        self.sent: list[Frames] = []
        self.changes = 0
        self.observed = Observed()
        self.dispatch = InboundDispatch(
            self.session,
            self.streams,
            self.counters,
            send_control=self.sent.append,
            on_change=self._changed,
            on_outputs=self.observed,
        )

    def _changed(self) -> None:
        self.changes += 1

    def receive(self, frames: list[FrameLike]) -> None:
        """One message, as the link's reader hands it on."""
        accept(frames, self.dispatch.on_message, self.counters, worker_frame_count)

    def open_stream(self, rid: str) -> ResponseStream:
        """A stream for ``rid``, in flight here."""
        stream = ResponseStream(rid)
        self.streams[rid] = stream
        return stream

    def rejected(self) -> dict[str, int]:
        """The rejected counts by reason."""
        return dict(self.counters.snapshot().get("rejected", {}))


@pytest.fixture
def harness() -> Harness:
    """A dispatch for worker w0 with an outputs observer that records its calls."""
    return Harness()


def rows(
    *rids: str, sent_ns: int | None = None, row_traces: list[str] | None = None
) -> list[FrameLike]:
    """A STR_BATCH with one row per rid (text ``t-<rid>``), owned by w0; stamped now,
    or with ``sent_ns`` (0: unstamped)."""
    batch = BatchStrOutput(
        rids=list(rids),
        output_strs=[f"t-{rid}" for rid in rids],
        http_worker_ipcs=[ADDRESS] * len(rids),
    )
    frames: list[FrameLike] = list(frame_batch(batch, row_traces=row_traces or []))
    if sent_ns is not None:
        header = Header(Kind.STR_BATCH, list(rids), [ADDRESS] * len(rids), sent_ns)
        frames[0] = encode_header(header)
    return frames


def control(kind: Kind, payload: msgspec.Struct) -> list[FrameLike]:
    return list(frame_message(kind, payload))


def bare(kind: Kind) -> bytes:
    return encode_header(Header(kind))


LOAD = control(Kind.LOAD, LoadSnapshot(taken_ns=1))
GENERATE = list(
    frame_message(
        Kind.GENERATE, GenerateRequest(rid="r", input_ids=[1]), rids=["r"], reply_to=[ADDRESS]
    )
)


class TestFrameRules:
    @pytest.mark.parametrize(
        ("frames", "reason"),
        [
            pytest.param([rows("a", "b")[0], rows("a", "b")[1]], "frame_count", id="batch-short"),
            pytest.param([*rows("a"), rows("a")[1]], "frame_count", id="batch-long"),
            pytest.param([bare(Kind.IDLE)], "frame_count", id="idle-bare"),
            pytest.param([bare(Kind.IDLE), b"payload"], "unexpected_kind", id="idle-payload"),
            pytest.param([GENERATE[0]], "frame_count", id="generate-bare"),
            pytest.param(GENERATE, "unexpected_kind", id="generate"),
            pytest.param([*GENERATE, GENERATE[1]], "frame_count", id="generate-long"),
            pytest.param([LOAD[0]], "frame_count", id="load-bare"),
            pytest.param([*LOAD, LOAD[1]], "frame_count", id="load-long"),
            pytest.param(
                control(Kind.HEARTBEAT, Heartbeat(worker_id="w0", seq=1, state="serving")),
                "unexpected_kind",
                id="heartbeat",
            ),
            pytest.param([LOAD[0], b"\xc1"], "bad_payload", id="load-garbage"),
            pytest.param([b"\xc1", b"x"], "bad_header", id="header-garbage"),
        ],
    )
    def test_refused_messages_count_their_reason(
        self, harness: Harness, frames: list[FrameLike], reason: str
    ) -> None:
        """Each message that breaks the worker's rules is counted once, with its reason."""
        harness.receive(frames)
        assert harness.rejected() == {reason: 1}
        assert harness.sent == [] and harness.changes == 0

    def test_frame_count_is_one_per_row_for_batches_and_one_otherwise(self) -> None:
        """A batch carries a frame per row; every other kind (IDLE too) exactly one."""
        assert worker_frame_count(Header(Kind.STR_BATCH, ["a", "b"], [ADDRESS] * 2)) == 2
        assert worker_frame_count(Header(Kind.IDLE)) == 1
        assert worker_frame_count(Header(Kind.LOAD)) == 1


class TestControlTable:
    def test_the_table_handles_exactly_the_six_control_payloads(self, harness: Harness) -> None:
        """Registration replies, pause broadcasts, drains, loads, freeze-GC and upstream
        incarnations, by type."""
        assert set(harness.dispatch.payload_handlers) == {
            RegistrationReply,
            PauseContinueBroadcast,
            DrainCommand,
            LoadSnapshot,
            FreezeGC,
            UpstreamIncarnation,
        }
        kinds = handlers_by_kind(harness.dispatch.payload_handlers)
        assert set(kinds) == {
            Kind.REGISTER_REPLY,
            Kind.PAUSE_BROADCAST,
            Kind.DRAIN,
            Kind.UPSTREAM,
            Kind.LOAD,
            Kind.FREEZE_GC,
        }

    def test_a_payload_type_no_kind_carries_is_refused(self) -> None:
        """A handler for a struct that is no kind's payload is a wiring error."""

        class Stray(msgspec.Struct):
            pass

        with pytest.raises(ValueError, match="Stray"):
            handlers_by_kind({Stray: lambda payload: None})

    def test_accepted_registration_registers_and_signals(self, harness: Harness) -> None:
        """An accepted reply registers the worker, is counted, sends nothing, signals."""
        harness.receive(control(Kind.REGISTER_REPLY, RegistrationReply("w0", True)))
        assert harness.session.registered
        assert harness.counters.get("registration_replies", "accepted") == 1
        assert harness.sent == [] and harness.changes == 1

    def test_refused_registration_sends_a_new_registration(self, harness: Harness) -> None:
        """A refusal (the router forgot us) sends a registration at once."""
        harness.receive(control(Kind.REGISTER_REPLY, RegistrationReply("w0", False)))
        assert harness.counters.get("registration_replies", "refused") == 1
        assert [decode_header(frames[0]).kind for frames in harness.sent] == [Kind.REGISTER]

    def test_pause_broadcast_is_applied_acknowledged_and_signalled(self, harness: Harness) -> None:
        """A pause is applied, counted, acknowledged (one ACK sent) and signalled."""
        harness.receive(
            control(Kind.PAUSE_BROADCAST, PauseContinueBroadcast("n-1", True, "in_place"))
        )
        assert harness.session.paused
        assert harness.counters.get("pause_broadcasts", "pause") == 1
        assert [decode_header(frames[0]).kind for frames in harness.sent] == [Kind.ACK]
        assert harness.changes == 1

    def test_drain_is_applied_and_signalled(self, harness: Harness) -> None:
        """A drain command is applied, counted and signalled; nothing is sent back."""
        harness.receive(control(Kind.DRAIN, DrainCommand("w0", True)))
        assert harness.session.draining
        assert harness.counters.get("drain_commands", "drain") == 1
        assert harness.sent == [] and harness.changes == 1

    def test_a_new_engine_incarnation_ends_its_streams_with_abort(self, harness: Harness) -> None:
        """A load from a new engine ends what the old one had; no signal, nothing sent."""
        harness.receive(control(Kind.LOAD, LoadSnapshot(taken_ns=1, engine_started_ns=100)))
        old = harness.open_stream("old")
        old.engine_incarnation = 100
        newer = harness.open_stream("new")
        newer.engine_incarnation = 200
        harness.receive(control(Kind.LOAD, LoadSnapshot(taken_ns=2, engine_started_ns=200)))
        (row,) = old.take_ready()
        assert row.finished_reasons == [lost_reason("engine_restarted", ENGINE_RESTARTED)]
        assert not newer.finished
        assert harness.counters.get("lost_requests", "engine_restarted") == 1
        assert harness.sent == [] and harness.changes == 0

    def test_freeze_gc_freezes(self, harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
        """Freeze-GC has its own handler: gc.freeze() runs and is counted."""
        frozen: list[bool] = []
        monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
        harness.receive(control(Kind.FREEZE_GC, FreezeGC()))
        assert frozen == [True]
        assert harness.counters.get("freeze_gc", "applied") == 1


class TestRows:
    def test_rows_reach_their_streams_and_are_observed(self, harness: Harness) -> None:
        """Each row goes to its own stream; the observer sees the message once."""
        streams = [harness.open_stream(rid) for rid in ("a", "b")]
        frames = rows("a", "b")
        harness.receive(frames)
        texts = [[getattr(row, "output_strs", None) for row in s.take_ready()] for s in streams]
        assert texts == [[["t-a"]], [["t-b"]]]
        assert harness.session.rows_received == 2
        ((latency_s, count, nbytes),) = harness.observed
        assert latency_s is not None and latency_s >= 0
        assert count == 2 and nbytes == sum(len(frame) for frame in frames)

    def test_an_unstamped_message_has_no_hop_latency(self, harness: Harness) -> None:
        """A message whose sender did not stamp sent_ns is observed with latency None."""
        harness.open_stream("a")
        harness.receive(rows("a", sent_ns=0))
        ((latency_s, count, _),) = harness.observed
        assert latency_s is None and count == 1

    def test_a_row_for_no_open_stream_is_dropped(self, harness: Harness) -> None:
        """A row whose request is not in flight here is dropped and counted."""
        harness.receive(rows("gone"))
        assert harness.counters.get("dropped", "unknown_request") == 1

    def test_a_row_for_another_request_is_rejected(self, harness: Harness) -> None:
        """A row whose own rid differs from the header's is rejected as bad_row."""
        stream = harness.open_stream("a")
        harness.receive([rows("a")[0], rows("b")[1]])
        assert harness.rejected() == {"bad_row": 1}
        assert stream.take_ready() == []

    def test_an_undecodable_row_is_rejected(self, harness: Harness) -> None:
        """A row that does not decode is rejected with the codec's reason."""
        harness.open_stream("a")
        harness.receive([rows("a")[0], b"\xc1"])
        assert harness.rejected() == {"bad_payload": 1}

    def test_an_observer_failure_is_counted_and_costs_no_rows(self, harness: Harness) -> None:
        """An observer that raises is counted; rows before and after are still delivered."""

        def broken(latency_s: float | None, count: int, nbytes: int) -> None:
            raise RuntimeError("observer bug")

        dispatch = InboundDispatch(
            harness.session,
            harness.streams,
            harness.counters,
            send_control=harness.sent.append,
            on_change=lambda: None,
            on_outputs=broken,
        )
        stream = harness.open_stream("a")
        for _ in range(2):
            accept(rows("a"), dispatch.on_message, harness.counters, worker_frame_count)
        assert len(stream.take_ready()) == 2
        assert harness.counters.get("observer_errors", "on_outputs") == 2

    @pytest.mark.usefixtures("no_tracing_environment")
    def test_traced_rows_are_received_in_one_batch_span(
        self, harness: Harness, exporter: InMemorySpanExporter
    ) -> None:
        """With tracing on, a message carrying row traces makes one receive span."""
        harness.open_stream("a")
        harness.open_stream("b")
        harness.receive(rows("a", "b", row_traces=[SAMPLED, ""]))
        assert [span.name for span in exporter.get_finished_spans()] == [RECEIVE_SPAN]
