"""The detokenizer router's core, in-process: real batches from the wire codec, validated
by router_core.inbound.accept as the shell's reader does, and a hand-set clock. Which
detokenizer each row goes to, what each piece counts once sent, broadcasts, the
assignment saved as it grows and kept across a restart, forged input refused, and the
incarnation beacon. No sockets, no sleeps."""

from __future__ import annotations

import msgspec

from router_core.beacon import IncarnationBeacon
from router_core.detokenizer_router.core import DetokenizerRouterCore
from router_core.detokenizer_router.effects import (
    Beacon,
    Effect,
    Instant,
    SaveAssignment,
    Send,
)
from router_core.detokenizer_router.picker import StickyKey
from router_core.inbound import accept
from router_core.transport import FrameLike
from router_core.wire import Header, Kind, decode_header, decode_message, encode_header
from router_core.wire.codec import frame_batch, frame_message
from router_core.wire.control import FreezeGC, LoadSnapshot, UpstreamIncarnation
from router_core.wire.outputs import BatchStrOutput, BatchTokenIDOutput
from router_core.wire.requests import GenerateRequest

W0, W1, W2 = "ipc:///w0", "ipc:///w1", "ipc:///w2"
NOW = Instant(mono=500.0, wall=1_700_000_000.0)


class Driver:
    """A core for ``count`` detokenizers, fed whole messages."""

    def __init__(
        self,
        count: int = 2,
        key: StickyKey = "worker",
        assigned: dict[str, int] | None = None,
        beacon: IncarnationBeacon | None = None,
    ) -> None:
        self.core = DetokenizerRouterCore(count, key, assigned=assigned, beacon=beacon)

    def receive(self, frames: list[FrameLike] | list[bytes], at: Instant = NOW) -> list[Effect]:
        """One message, as the shell's reader hands it on; the effects the core returns."""
        effects: list[Effect] = []

        def handle(header: Header, message: list[FrameLike]) -> None:
            effects.extend(self.core.on_message(header, message, at))

        accept(list(frames), handle, self.core.counters)
        return effects

    def counted(self, name: str) -> dict[str, int]:
        return dict(self.core.counters.snapshot().get(name, {}))


def batch(*rows: tuple[str, str], sent_ns: int = 0) -> list[FrameLike]:
    """A TOKEN_BATCH of ``(rid, owner address)`` rows, stamped ``sent_ns`` (0: not)."""
    out = BatchTokenIDOutput(
        rids=[rid for rid, _ in rows],
        http_worker_ipcs=[owner for _, owner in rows],
        decode_ids=[[1, 2]] * len(rows),
    )
    frames: list[FrameLike] = list(frame_batch(out))
    if sent_ns:
        header = decode_header(frames[0])
        frames[0] = encode_header(Header(header.kind, header.rids, header.reply_to, sent_ns))
    return frames


def routed(effects: list[Effect]) -> dict[int, list[str]]:
    """The rids each detokenizer is sent, decoded from the pieces."""
    return {
        effect.to: decode_header(effect.frames[0]).rids
        for effect in effects
        if isinstance(effect, Send)
    }


class TestRouting:
    """Batches are split per detokenizer, sticky per worker, rows never decoded."""

    def test_each_worker_goes_to_the_least_used_detokenizer_and_stays(self) -> None:
        """w0 takes detokenizer 0, w1 detokenizer 1; a later batch follows them."""
        driver = Driver()
        assert routed(driver.receive(batch(("a", W0), ("b", W1), ("c", W0)))) == {
            0: ["a", "c"],
            1: ["b"],
        }
        assert routed(driver.receive(batch(("d", W1)))) == {1: ["d"]}

    def test_a_piece_carries_its_rows_and_what_to_count_once_sent(self) -> None:
        """Each piece is a whole message of its rows (payload frames untouched), with
        its routed_rows count and its bytes per owner for the traffic statistics."""
        driver = Driver()
        frames = batch(("a", W0), ("b", W1), ("c", W0))
        pieces = [e for e in driver.receive(frames) if isinstance(e, Send)]
        first = pieces[0]
        assert list(first.frames[1:]) == [frames[1], frames[3]]
        assert first.counter == ("routed_rows", "detokenizer-0", 2)
        assert first.traffic == ((W0, len(frames[1]) + len(frames[3])),)
        header, rows = decode_message(list(first.frames))  # type: ignore[arg-type]
        assert header.reply_to == [W0, W0] and [row.rids for row in rows] == [["a"], ["c"]]

    def test_request_stickiness_spreads_one_workers_rows(self) -> None:
        """With the request key, rows go by crc32(rid) and no assignment is kept."""
        driver = Driver(count=4, key="request")
        effects = driver.receive(batch(*((f"r{n}", W0) for n in range(16))))
        assert len(routed(effects)) > 1
        assert not any(isinstance(effect, SaveAssignment) for effect in effects)

    def test_the_hop_latency_is_measured_at_the_core_clock(self) -> None:
        """A batch sent 0.5 s before ``at.wall`` is one 0.5 s hop observation; the split
        size is observed too."""
        driver = Driver()
        driver.receive(batch(("a", W0), sent_ns=int((NOW.wall - 0.5) * 1e9)))
        hop = driver.core.traffic.hop_latency.get("detokenize")
        assert hop is not None and hop.count == 1 and abs(hop.sum - 0.5) < 1e-3
        split = driver.core.traffic.split_rows.get("detokenize")
        assert split is not None and split.count == 1


class TestAssignment:
    """The worker assignment is saved as it grows, after the pieces it routed."""

    def test_a_new_worker_is_saved_after_its_rows_are_sent(self) -> None:
        """The first batch of a worker ends with SaveAssignment; the next does not."""
        driver = Driver()
        effects = driver.receive(batch(("a", W0)))
        assert isinstance(effects[0], Send)
        assert effects[-1] == SaveAssignment({W0: 0})
        assert not any(isinstance(e, SaveAssignment) for e in driver.receive(batch(("b", W0))))

    def test_a_restarted_router_routes_each_worker_where_it_went_before(self) -> None:
        """Given the saved assignment, a restarted core keeps every known worker with
        the detokenizer that holds its requests' state, and saves only a new worker."""
        first = Driver(count=3)
        first.receive(batch(("a", W0), ("b", W1), ("c", W2)))
        saved = first.core.picker.assignments()
        restarted = Driver(count=3, assigned={W2: saved[W2], W0: saved[W0]})
        effects = restarted.receive(batch(("d", W2), ("e", W0)))
        assert routed(effects) == {saved[W2]: ["d"], saved[W0]: ["e"]}
        assert not any(isinstance(effect, SaveAssignment) for effect in effects)
        assert restarted.core.workers_per_detokenizer() == [1, 0, 1]

    def test_workers_per_detokenizer_is_none_unless_sticky_per_worker(self) -> None:
        """Only the worker key keeps an assignment to count."""
        assert Driver(key="worker-crc32").core.workers_per_detokenizer() is None


class TestBroadcastAndRefusals:
    """Freeze-GC and idle go everywhere; what is not the router's to route is refused."""

    def test_freeze_gc_and_idle_go_to_every_detokenizer(self) -> None:
        """The same frames to each index, counted once per message under broadcast."""
        driver = Driver(count=3)
        frames = list(frame_message(Kind.FREEZE_GC, FreezeGC()))
        effects = driver.receive(frames)
        assert [(e.to, list(e.frames)) for e in effects if isinstance(e, Send)] == [
            (index, frames) for index in range(3)
        ]
        idle = [encode_header(Header(Kind.IDLE))]
        assert len(driver.receive(idle)) == 3
        assert driver.counted("broadcast") == {"freeze_gc": 1, "idle": 1}

    def test_kinds_that_are_not_outputs_are_refused(self) -> None:
        """A request, a load snapshot or a beacon sent here asks for nothing and is
        counted unexpected_kind."""
        driver = Driver()
        messages: list[tuple[Kind, msgspec.Struct]] = [
            (Kind.LOAD, LoadSnapshot(taken_ns=1)),
            (Kind.UPSTREAM, UpstreamIncarnation("detokenizer-0", 1)),
        ]
        for kind, payload in messages:
            assert driver.receive(list(frame_message(kind, payload))) == []
        request = frame_message(
            Kind.GENERATE, GenerateRequest(rid="r", input_ids=[1]), rids=["r"], reply_to=[W0]
        )
        assert driver.receive(list(request)) == []
        assert driver.counted("rejected") == {"unexpected_kind": 3}

    def test_malformed_messages_never_reach_the_core(self) -> None:
        """A garbage header or a batch short of a row frame is counted by the reader
        and routes nothing; nothing is assigned."""
        driver = Driver()
        frames = batch(("a", W0), ("b", W1))
        assert driver.receive([b"\xc1", b"x"]) == []
        assert driver.receive(frames[:2]) == []
        assert driver.counted("rejected") == {"bad_header": 1, "frame_count": 1}
        assert driver.core.picker.assignments() == {}

    def test_text_batches_are_routed_too(self) -> None:
        """A STR_BATCH is split like a token batch (the router never decodes rows)."""
        driver = Driver()
        out = BatchStrOutput(rids=["a"], http_worker_ipcs=[W1], output_strs=["x"])
        assert routed(driver.receive(list(frame_batch(out)))) == {0: ["a"]}


class TestBeacon:
    """The incarnation beacon's schedule runs on the clock the shell hands in."""

    def test_the_beacon_is_due_once_per_interval(self) -> None:
        """Due at once, then not until a second later; next_due says when."""
        driver = Driver(beacon=IncarnationBeacon("detokenizer-router", incarnation=7))
        effects, due = driver.core.tick(NOW)
        (beacon,) = effects
        assert isinstance(beacon, Beacon) and due == NOW.mono + 1.0
        _, (news,) = decode_message(list(beacon.frames))  # type: ignore[arg-type]
        assert news == UpstreamIncarnation("detokenizer-router", 7)
        assert driver.core.tick(Instant(NOW.mono + 0.5, NOW.wall)) == ([], NOW.mono + 1.0)
        assert driver.core.next_due() == NOW.mono + 1.0

    def test_no_beacon_no_timer(self) -> None:
        """A router with no tokenizer router to tell has no timer."""
        driver = Driver()
        assert driver.core.tick(NOW) == ([], None) and driver.core.next_due() is None
