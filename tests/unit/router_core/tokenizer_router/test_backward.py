"""The backward path and the inbound tables, in-process: a batch split for three workers,
freeze-GC and idle batches, and what each table refuses."""

from __future__ import annotations

import msgspec
import pytest

from router_core.tokenizer_router.dispatch import Decoded, Raw
from router_core.wire import PAYLOAD_TYPES, Kind, decode_header, frame_batch, frame_message
from router_core.wire.control import FreezeGC, Heartbeat
from router_core.wire.outputs import BatchStrOutput
from tests.unit.router_core.tokenizer_router.shell import CoreShell, address_of, sends


def text_batch(owners: list[str]) -> list[bytes]:
    """A framed text batch, one row per owner, rids ``r0..rN``."""
    batch = BatchStrOutput(
        rids=[f"r{i}" for i in range(len(owners))],
        output_strs=[f"text {i}" for i in range(len(owners))],
        http_worker_ipcs=[address_of(owner) for owner in owners],
    )
    return frame_batch(batch)


class TestSplit:
    """A batch goes to each owning worker as one message carrying only its rows."""

    def test_a_batch_for_three_workers_is_split_per_worker(self) -> None:
        """Six interleaved rows for w1..w3: three messages, each with that worker's rows in
        order, row frames passed through untouched, routed rows counted on send."""
        shell = CoreShell()
        for worker in ("w1", "w2", "w3"):
            shell.register(worker)
        frames = text_batch(["w1", "w2", "w3", "w1", "w3", "w3"])
        out = sends(shell.outputs(decode_header(frames[0]), frames))
        assert [send.to for send in out] == [address_of(w) for w in ("w1", "w2", "w3")]
        by_worker = {send.to: send for send in out}
        expected = {"w1": [0, 3], "w2": [1], "w3": [2, 4, 5]}
        for worker, rows in expected.items():
            send = by_worker[address_of(worker)]
            header = decode_header(send.frames[0])
            assert header.rids == [f"r{row}" for row in rows]
            assert header.reply_to == [address_of(worker)] * len(rows)
            assert all(send.frames[i + 1] is frames[row + 1] for i, row in enumerate(rows))
            assert send.counter == ("routed_rows", "str_batch", len(rows))
        assert shell.core.traffic.split_rows.snapshot()["backward"]["count"] == 1

    def test_rows_for_an_unknown_worker_are_dropped_and_counted(self) -> None:
        """Rows owned by an address no registered worker has are dropped, counted by rows."""
        shell = CoreShell()
        shell.register("w1")
        frames = text_batch(["w1", "gone", "gone"])
        (send,) = sends(shell.outputs(decode_header(frames[0]), frames))
        assert send.to == address_of("w1")
        assert shell.core.counters.get("dropped", "unknown_worker") == 2

    def test_freeze_gc_goes_to_every_worker_and_idle_is_counted(self) -> None:
        """FREEZE_GC is forwarded untouched to each worker; IDLE only counts."""
        shell = CoreShell()
        shell.register("w1")
        shell.register("w2")
        frames = frame_message(Kind.FREEZE_GC, FreezeGC(reason="engine"))
        out = sends(shell.outputs(decode_header(frames[0]), frames))
        assert [(s.to, s.frames) for s in out] == [(address_of(w), frames) for w in ("w1", "w2")]
        idle = frame_message(Kind.IDLE, None)
        assert shell.outputs(decode_header(idle[0]), idle) == []
        assert shell.core.counters.get("idle_batches", "outputs") == 1


class TestTables:
    """Each socket's table decodes its kinds' structs and refuses everything else."""

    def test_every_decoded_entry_uses_its_kinds_payload_struct(self) -> None:
        """A table entry's struct is the codec's payload type for that kind."""
        core = CoreShell().core
        for table in (core.worker_messages, core.engine_events, core.outputs):
            for kind, entry in table.entries.items():
                if isinstance(entry, Decoded):
                    assert entry.struct is PAYLOAD_TYPES[kind]
                else:
                    assert isinstance(entry, Raw)

    @pytest.mark.parametrize("kind", [Kind.LOAD, Kind.GENERATE, Kind.PAUSE_BROADCAST])
    def test_a_kind_with_no_entry_is_rejected(self, kind: Kind) -> None:
        """The workers' socket refuses kinds it does not take, counted unexpected_kind."""
        shell = CoreShell()
        frames = frame_message(Kind.HEARTBEAT, Heartbeat(worker_id="w1"))
        header = msgspec.structs.replace(decode_header(frames[0]), kind=kind)
        assert shell.core.worker_messages.dispatch(header, frames, shell.at) == []
        assert shell.core.counters.get("rejected", "unexpected_kind") == 1

    def test_a_payload_that_does_not_decode_is_rejected(self) -> None:
        """A heartbeat whose payload is not a Heartbeat is counted bad_payload."""
        shell = CoreShell()
        frames = frame_message(Kind.HEARTBEAT, Heartbeat(worker_id="w1"))
        frames[1] = b"\xc1"
        assert shell.core.worker_messages.dispatch(decode_header(frames[0]), frames, shell.at) == []
        assert shell.core.counters.get("rejected", "bad_payload") == 1
