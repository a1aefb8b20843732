"""The worker link's inbound core, in-process: which messages router_core.inbound.accept
lets through under the worker's frame-count rule (and the reason counted for each one
refused), each control kind's effects, forged input refused, and rows delivered to their
request's stream. Real core, real wire codec, a hand-set clock; no sockets, no sleeps."""

from __future__ import annotations

import msgspec
import pytest

from router_core.transport import FrameLike
from router_core.wire import Header, Kind, encode_header, frame_batch, frame_message
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
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput
from router_core.wire.requests import GenerateRequest
from router_core.worker_link.dispatch import ENGINE_RESTARTED, handlers_by_kind, worker_frame_count
from router_core.worker_link.effects import (
    FreezeGarbageCollector,
    Instant,
    OutputsReceived,
    SessionChanged,
)
from router_core.worker_link.streams import UNDETOKENIZED_CAUSE
from tests.unit.router_core.worker_link.core_driver import ADDRESS, CoreDriver, sends


@pytest.fixture
def driver() -> CoreDriver:
    """The inbound core of worker w0, fresh."""
    return CoreDriver()


def rows(*rids: str, sent_ns: int | None = None) -> list[FrameLike]:
    """A STR_BATCH with one row per rid (text ``t-<rid>``), owned by w0; stamped now,
    or with ``sent_ns`` (0: unstamped)."""
    batch = BatchStrOutput(
        rids=list(rids),
        output_strs=[f"t-{rid}" for rid in rids],
        http_worker_ipcs=[ADDRESS] * len(rids),
    )
    frames: list[FrameLike] = list(frame_batch(batch))
    if sent_ns is not None:
        frames[0] = encode_header(
            Header(Kind.STR_BATCH, list(rids), [ADDRESS] * len(rids), sent_ns)
        )
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
    """What the reader refuses before the core, and kinds the core has no entry for."""

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
            pytest.param(
                [control(Kind.REGISTER_REPLY, RegistrationReply("w0", True))[0], LOAD[1]],
                "bad_payload",
                id="reply-carrying-a-load",
            ),
            pytest.param([b"\xc1", b"x"], "bad_header", id="header-garbage"),
        ],
    )
    def test_refused_messages_count_their_reason(
        self, driver: CoreDriver, frames: list[FrameLike], reason: str
    ) -> None:
        """Each message that breaks the worker's rules is counted once, with its reason,
        and asks for nothing."""
        assert driver.receive(frames) == []
        assert driver.rejected() == {reason: 1}
        assert driver.session.load is None and not driver.session.draining

    def test_frame_count_is_one_per_row_for_batches_and_one_otherwise(self) -> None:
        """A batch carries a frame per row; every other kind (IDLE too) exactly one."""
        assert worker_frame_count(Header(Kind.STR_BATCH, ["a", "b"], [ADDRESS] * 2)) == 2
        assert worker_frame_count(Header(Kind.IDLE)) == 1
        assert worker_frame_count(Header(Kind.LOAD)) == 1


class TestControlTable:
    """Each control kind: what it changes and the effects it returns."""

    def test_the_table_handles_exactly_the_six_control_payloads(self, driver: CoreDriver) -> None:
        """Registration replies, pause broadcasts, drains, loads, freeze-GC and upstream
        incarnations, by type, each carried by its kind."""
        handlers = driver.core.payload_handlers
        assert set(handlers) == {
            RegistrationReply,
            PauseContinueBroadcast,
            DrainCommand,
            LoadSnapshot,
            FreezeGC,
            UpstreamIncarnation,
        }
        assert set(handlers_by_kind(handlers)) == {
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
            handlers_by_kind({Stray: lambda payload, at: []})

    def test_accepted_registration_registers_and_signals(self, driver: CoreDriver) -> None:
        """An accepted reply registers the worker, is counted, sends nothing, signals."""
        assert driver.reply() == [SessionChanged()]
        assert driver.session.registered
        assert driver.counters.get("registration_replies", "accepted") == 1

    def test_refused_registration_sends_a_new_registration(self, driver: CoreDriver) -> None:
        """A refusal (the router forgot us) sends a registration at once, then signals."""
        effects = driver.control(Kind.REGISTER_REPLY, RegistrationReply("w0", False))
        assert sends(effects) == [("control", Kind.REGISTER)]
        assert effects[-1] == SessionChanged()
        assert driver.counters.get("registration_replies", "refused") == 1

    def test_pause_broadcast_is_applied_acknowledged_and_signalled(
        self, driver: CoreDriver
    ) -> None:
        """A pause is applied and counted; its ACK goes out before the signal."""
        effects = driver.control(
            Kind.PAUSE_BROADCAST, PauseContinueBroadcast("1-1", True, "in_place")
        )
        assert driver.session.paused and driver.session.pause_mode == "in_place"
        assert driver.counters.get("pause_broadcasts", "pause") == 1
        assert sends(effects) == [("control", Kind.ACK)]
        assert effects[-1] == SessionChanged()

    def test_drain_is_applied_and_signalled(self, driver: CoreDriver) -> None:
        """A drain command is applied, counted and signalled; nothing is sent back."""
        assert driver.control(Kind.DRAIN, DrainCommand("w0", True)) == [SessionChanged()]
        assert driver.session.draining
        assert driver.control(Kind.DRAIN, DrainCommand("w0", False)) == [SessionChanged()]
        assert not driver.session.draining
        assert driver.counters.snapshot()["drain_commands"] == {"drain": 1, "undrain": 1}

    def test_a_new_engine_incarnation_ends_its_streams_with_abort(self, driver: CoreDriver) -> None:
        """A load from a new engine ends what the old one had, at the core's clock; no
        signal, nothing sent."""
        assert driver.control(Kind.LOAD, LoadSnapshot(taken_ns=1, engine_started_ns=100)) == []
        old, newer = driver.open_stream("old"), driver.open_stream("new")
        old.engine_incarnation, newer.engine_incarnation = 100, 200
        later = Instant(mono=2000.0, wall=1_700_000_100.0)
        load = control(Kind.LOAD, LoadSnapshot(taken_ns=2, engine_started_ns=200))
        assert driver.receive(load, at=later) == []
        (row,) = old.take_ready()
        assert row.finished_reasons == [lost_reason("engine_restarted", ENGINE_RESTARTED)]
        assert old.updated_at == 2000.0 and old.lost_cause == "engine_restarted"
        assert not newer.finished
        assert driver.counters.get("lost_requests", "engine_restarted") == 1

    def test_an_older_load_snapshot_is_ignored(self, driver: CoreDriver) -> None:
        """A snapshot taken before the one kept changes nothing (no reordering)."""
        driver.control(Kind.LOAD, LoadSnapshot(taken_ns=5, running=5))
        driver.control(Kind.LOAD, LoadSnapshot(taken_ns=4, running=4))
        assert driver.session.load is not None and driver.session.load.running == 5

    def test_freeze_gc_is_an_effect(self, driver: CoreDriver) -> None:
        """Freeze-GC is counted and asked of the shell; the core freezes nothing itself."""
        assert driver.control(Kind.FREEZE_GC, FreezeGC()) == [FreezeGarbageCollector()]
        assert driver.counters.get("freeze_gc", "applied") == 1

    def test_an_upstream_restart_suspects_producing_streams_at_the_core_clock(
        self, driver: CoreDriver
    ) -> None:
        """A grown incarnation marks producing streams as of ``at``; a first sighting and
        an older incarnation do nothing."""
        producing, queued = driver.open_stream("p"), driver.open_stream("q")
        driver.row("p")
        assert driver.control(Kind.UPSTREAM, UpstreamIncarnation("detokenizer-0", 10)) == []
        assert producing.suspect is None
        later = Instant(mono=1500.0, wall=1_700_000_050.0)
        news = control(Kind.UPSTREAM, UpstreamIncarnation("detokenizer-0", 11))
        assert driver.receive(news, at=later) == []
        assert producing.suspect == (1500.0, "detokenizer-0") and queued.suspect is None
        driver.control(Kind.UPSTREAM, UpstreamIncarnation("detokenizer-0", 9))
        assert driver.counters.get("upstream_restarts", "seen") == 1


class TestForgedInput:
    """Messages meant for another worker, or not meant at all, change nothing."""

    def test_a_reply_for_another_worker_does_not_register(self, driver: CoreDriver) -> None:
        """A registration reply naming another worker is counted but not applied."""
        driver.control(Kind.REGISTER_REPLY, RegistrationReply("w9", True, paused=True))
        assert not driver.session.registered and not driver.session.paused

    def test_a_drain_for_another_worker_is_ignored(self, driver: CoreDriver) -> None:
        """A drain naming another worker leaves this one admitting."""
        driver.reply()
        driver.control(Kind.DRAIN, DrainCommand("w9", True))
        assert not driver.session.draining and driver.session.admitting

    def test_a_bad_key_refusal_while_registered_is_ignored(self, driver: CoreDriver) -> None:
        """A bad-key refusal arriving while registered neither unregisters nor sends."""
        driver.reply()
        refusal = RegistrationReply("w0", False, reason="bad_key")
        assert sends(driver.control(Kind.REGISTER_REPLY, refusal)) == []
        assert driver.session.registered


class TestRows:
    """Output rows: to their streams, counted, reported once per message."""

    def test_rows_reach_their_streams_and_are_reported(self, driver: CoreDriver) -> None:
        """Each row goes to its own stream at the core's clock; one OutputsReceived
        reports the message's hop latency, rows and bytes."""
        streams = [driver.open_stream(rid) for rid in ("a", "b")]
        sent_ns = int((driver.now.wall - 0.25) * 1e9)
        frames = rows("a", "b", sent_ns=sent_ns)
        (report,) = driver.receive(frames)
        texts = [[getattr(row, "output_strs", None) for row in s.take_ready()] for s in streams]
        assert texts == [[["t-a"]], [["t-b"]]]
        assert [s.updated_at for s in streams] == [driver.now.mono] * 2
        assert driver.session.rows_received == 2
        assert isinstance(report, OutputsReceived)
        assert report.latency_s == pytest.approx(0.25, abs=1e-3)
        assert (report.rows, report.nbytes) == (2, sum(len(frame) for frame in frames))

    def test_an_unstamped_message_has_no_hop_latency(self, driver: CoreDriver) -> None:
        """A message whose sender did not stamp sent_ns is reported with latency None."""
        driver.open_stream("a")
        frames = rows("a", sent_ns=0)
        assert driver.receive(frames) == [OutputsReceived(None, 1, sum(map(len, frames)))]

    def test_a_stamp_from_the_future_is_no_negative_latency(self, driver: CoreDriver) -> None:
        """A sender clock ahead of ours gives latency 0, not a negative one."""
        driver.open_stream("a")
        (report,) = driver.receive(rows("a", sent_ns=int((driver.now.wall + 5) * 1e9)))
        assert isinstance(report, OutputsReceived) and report.latency_s == 0.0

    def test_a_row_for_no_open_stream_is_dropped(self, driver: CoreDriver) -> None:
        """A row whose request is not in flight here is dropped and counted."""
        driver.receive(rows("gone"))
        assert driver.counters.get("dropped", "unknown_request") == 1
        assert driver.session.rows_received == 0

    def test_a_row_for_another_request_is_rejected(self, driver: CoreDriver) -> None:
        """A row whose own rid differs from the header's is rejected as bad_row."""
        stream = driver.open_stream("a")
        driver.receive([rows("a")[0], rows("b")[1]])
        assert driver.rejected() == {"bad_row": 1}
        assert stream.take_ready() == []

    def test_an_undecodable_row_is_rejected(self, driver: CoreDriver) -> None:
        """A row that does not decode is rejected with the codec's reason."""
        driver.open_stream("a")
        driver.receive([rows("a")[0], b"\xc1"])
        assert driver.rejected() == {"bad_payload": 1}

    def test_a_token_row_ends_its_stream_as_undetokenized(self, driver: CoreDriver) -> None:
        """A TOKEN_BATCH row has no text for a worker: its stream ends with a 502 abort
        naming the cause (token_rows)."""
        stream = driver.open_stream("a")
        batch = BatchTokenIDOutput(rids=["a"], http_worker_ipcs=[ADDRESS])
        driver.receive(list(frame_batch(batch)))
        (row,) = stream.take_ready()
        assert stream.finished and row.finished_reasons is not None
        assert row.finished_reasons[0]["err_type"] == UNDETOKENIZED_CAUSE

    def test_an_embedding_row_reaches_its_stream(self, driver: CoreDriver) -> None:
        """An EMBEDDING_BATCH row finishes its request's stream."""
        stream = driver.open_stream("e")
        batch = BatchEmbeddingOutput(
            rids=["e"],
            http_worker_ipcs=[ADDRESS],
            embeddings=[[0.5]],
            finished_reasons=[{"type": "stop"}],
        )
        driver.receive(list(frame_batch(batch)))
        (row,) = stream.take_ready()
        assert isinstance(row, BatchEmbeddingOutput) and stream.finished

    def test_a_gap_in_the_tokens_ends_the_stream_as_rows_lost(self, driver: CoreDriver) -> None:
        """A text row that does not start where the last one ended ends the stream, and
        the loss is counted (cause rows_lost)."""
        stream = driver.open_stream("a")
        first = BatchStrOutput(
            rids=["a"],
            http_worker_ipcs=[ADDRESS],
            output_strs=["x"],
            output_ids=[[1]],
            completion_tokens=[1],
        )
        skipped = BatchStrOutput(
            rids=["a"],
            http_worker_ipcs=[ADDRESS],
            output_strs=["z"],
            output_ids=[[3]],
            completion_tokens=[3],
        )
        driver.receive(list(frame_batch(first)))
        driver.receive(list(frame_batch(skipped)))
        assert stream.output_gap == (1, 2) and stream.lost_cause == "rows_lost"
        assert driver.counters.get("lost_requests", "rows_lost") == 1
