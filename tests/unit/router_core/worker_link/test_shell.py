"""The worker link's inbound shell, in-process: it stamps each message with the time,
runs the real core inside one receive span when rows are traced, and carries out the
effects in order (sends, the change signal, the outputs observer, gc.freeze), with an
observer's failure counted, never raised. No sockets: sends are recorded."""

from __future__ import annotations

import gc
import time

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router_core.counters import Counters
from router_core.inbound import accept
from router_core.transport import FrameLike
from router_core.wire import Kind, frame_batch, frame_message
from router_core.wire.control import FreezeGC, PauseContinueBroadcast
from router_core.wire.outputs import BatchStrOutput
from router_core.worker_link.dispatch import RECEIVE_SPAN, InboundDispatch, worker_frame_count
from router_core.worker_link.effects import Send
from router_core.worker_link.session import WorkerIdentity, WorkerSession
from router_core.worker_link.shell import InboundShell
from router_core.worker_link.streams import ResponseStream
from tests.unit.router_core.recorded_spans import SAMPLED

ADDRESS = "ipc:///tmp/sb-unit/worker-w0"


class Shell:
    """An inbound shell over the real core, recording what it sends and signals."""

    def __init__(self, observe: object = None) -> None:
        identity = WorkerIdentity("w0", ADDRESS, pid=1, host="", version="", started_ns=0)
        self.session = WorkerSession(identity)
        self.streams: dict[str, ResponseStream] = {}
        self.counters = Counters()
        self.sent: list[Send] = []
        self.events: list[str] = []
        self.observed: list[tuple[float | None, int, int]] = []
        self.shell = InboundShell(
            InboundDispatch(self.session, self.streams, self.counters),
            self.counters,
            send=self._send,
            on_change=lambda: self.events.append("change"),
            on_outputs=observe if observe is not None else self._observe,  # type: ignore[arg-type]
        )

    def _send(self, send: Send) -> None:
        self.sent.append(send)
        self.events.append("send")

    def _observe(self, latency_s: float | None, rows: int, nbytes: int) -> None:
        self.observed.append((latency_s, rows, nbytes))

    def receive(self, frames: list[FrameLike] | list[bytes]) -> None:
        accept(list(frames), self.shell.on_message, self.counters, worker_frame_count)

    def open_stream(self, rid: str) -> ResponseStream:
        stream = ResponseStream(rid)
        self.streams[rid] = stream
        return stream


def rows(*rids: str, row_traces: list[str] | None = None) -> list[bytes]:
    batch = BatchStrOutput(
        rids=list(rids), output_strs=["t"] * len(rids), http_worker_ipcs=[ADDRESS] * len(rids)
    )
    return list(frame_batch(batch, row_traces=row_traces or []))


class TestInboundShell:
    """What the shell does with the core's effects."""

    def test_a_pause_sends_its_ack_then_signals(self) -> None:
        """The ACK is sent on the control channel before admission is woken."""
        shell = Shell()
        shell.receive(
            frame_message(Kind.PAUSE_BROADCAST, PauseContinueBroadcast("1-1", True, "abort"))
        )
        assert shell.events == ["send", "change"]
        assert [send.channel for send in shell.sent] == ["control"]

    def test_rows_are_stamped_with_the_time_of_receipt_and_observed(self) -> None:
        """Rows land with the shell's monotonic clock; the observer sees the message."""
        shell = Shell()
        stream = shell.open_stream("a")
        before = time.monotonic()
        frames = rows("a")
        shell.receive(frames)
        assert before <= stream.updated_at <= time.monotonic()
        ((latency_s, count, nbytes),) = shell.observed
        assert latency_s is not None and latency_s >= 0
        assert (count, nbytes) == (1, sum(len(frame) for frame in frames))

    def test_an_observer_failure_is_counted_and_costs_no_rows(self) -> None:
        """An observer that raises is counted; rows before and after are still delivered."""

        def broken(latency_s: float | None, count: int, nbytes: int) -> None:
            raise RuntimeError("observer bug")

        shell = Shell(observe=broken)
        stream = shell.open_stream("a")
        shell.receive(rows("a"))
        shell.receive(rows("a"))
        assert len(stream.take_ready()) == 2
        assert shell.counters.get("observer_errors", "on_outputs") == 2

    def test_freeze_gc_freezes(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The core's FreezeGarbageCollector effect runs gc.freeze() in the shell."""
        frozen: list[bool] = []
        monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
        Shell().receive(frame_message(Kind.FREEZE_GC, FreezeGC()))
        assert frozen == [True]

    @pytest.mark.usefixtures("no_tracing_environment")
    def test_traced_rows_are_received_in_one_batch_span(
        self, exporter: InMemorySpanExporter
    ) -> None:
        """With tracing on, a message carrying row traces makes one receive span."""
        shell = Shell()
        shell.open_stream("a")
        shell.open_stream("b")
        shell.receive(rows("a", "b", row_traces=[SAMPLED, ""]))
        assert [span.name for span in exporter.get_finished_spans()] == [RECEIVE_SPAN]
