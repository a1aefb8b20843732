"""A worker link hears its router restart (a registration reply of a newer incarnation):
it asks the link to send again what no row has answered, and makes every producing
stream a suspect; a row marks its request answered (nothing to send again)."""

from __future__ import annotations

from router_core.counters import Counters
from router_core.inbound import accept
from router_core.wire import Kind, frame_message
from router_core.wire.codec import frame_batch
from router_core.wire.control import RegistrationReply
from router_core.wire.outputs import BatchStrOutput
from router_core.worker_link.dispatch import InboundDispatch, worker_frame_count
from router_core.worker_link.session import WorkerIdentity, WorkerSession
from router_core.worker_link.streams import ResponseStream

ADDRESS = "ipc:///tmp/sb-unit/worker-w0"


class Link:
    """A dispatch with the link's streams and a counting restart hook."""

    def __init__(self) -> None:
        identity = WorkerIdentity("w0", ADDRESS, pid=1, host="", version="", started_ns=0)
        self.session = WorkerSession(identity)
        self.streams: dict[str, ResponseStream] = {}
        self.counters = Counters()
        self.restarts = 0
        self.dispatch = InboundDispatch(
            self.session,
            self.streams,
            self.counters,
            send_control=lambda frames: None,
            on_change=lambda: None,
            on_router_restart=self._restarted,
        )

    def _restarted(self) -> None:
        self.restarts += 1

    def reply(self, incarnation: int) -> None:
        message = frame_message(
            Kind.REGISTER_REPLY,
            RegistrationReply(worker_id="w0", accepted=True, incarnation=incarnation),
        )
        accept(message, self.dispatch.on_message, self.counters, worker_frame_count)

    def row(self, rid: str) -> None:
        batch = BatchStrOutput(rids=[rid], http_worker_ipcs=[ADDRESS], output_strs=["x"])
        accept(frame_batch(batch), self.dispatch.on_message, self.counters, worker_frame_count)


def test_a_newer_incarnation_calls_the_restart_hook_once_and_suspects_producers() -> None:
    link = Link()
    link.reply(100)  # the first router this worker knew: not a restart
    assert link.restarts == 0
    producing, queued = ResponseStream("producing"), ResponseStream("queued")
    link.streams.update(producing=producing, queued=queued)
    producing.sent, queued.sent = [b"p"], [b"q"]
    link.row("producing")
    assert (producing.sent, queued.sent) == (None, [b"q"])  # a row answered it
    link.reply(100)  # the same router again
    assert link.restarts == 0
    link.reply(101)
    assert link.restarts == 1
    assert link.counters.snapshot()["router_restarts"] == {"seen": 1}
    assert producing.suspect is not None and producing.suspect[1] == "tokenizer-router"
    assert queued.suspect is None  # it never produced: the re-send covers it
