"""The tokenizer router's control commands and read-only replies, in-process."""

from __future__ import annotations

import msgspec
import pytest

from router_core.control import commands as spec
from router_core.control.protocol import ControlError, ErrorCode
from router_core.control.replies import RouterStatus, TokenizerRouterMetrics
from router_core.tokenizer_router.commands import COMMANDS
from router_core.tokenizer_router.effects import FreezeGarbageCollector, Persist, Send
from router_core.wire import Kind, decode_header
from router_core.wire.control import ENGINE, DrainCommand
from router_core.wire.requests import AbortRequest
from tests.unit.router_core.tokenizer_router.shell import CoreShell, address_of, payload_of


class TestTable:
    """One handler per command of the tokenizer router's catalogue."""

    def test_every_catalogued_command_has_a_handler(self) -> None:
        """The table serves exactly the commands the catalogue lists, with their structs."""
        assert set(COMMANDS) == set(spec.TOKENIZER_ROUTER_COMMANDS)
        for name, entry in COMMANDS.items():
            assert entry.command is spec.TOKENIZER_ROUTER_COMMANDS[name]


class TestDrain:
    """Drain and undrain one worker."""

    def test_drain_tells_the_worker_and_shows_it_draining(self) -> None:
        """The reply is the worker in state draining; it gets a DRAIN command."""
        shell = CoreShell()
        shell.register("w1")
        handled = shell.command("drain", worker_id="w1")
        assert handled.reply.state == "draining"
        persist, send = handled.effects
        assert isinstance(persist, Persist) and persist.state.drained == ["w1"]
        assert isinstance(send, Send) and send.to == address_of("w1")
        assert payload_of(send, DrainCommand) == DrainCommand("w1", drain=True)
        undrained = shell.command("undrain", worker_id="w1")
        assert undrained.reply.state == "serving"
        assert (
            isinstance(undrained.effects[0], Persist) and undrained.effects[0].state.drained == []
        )

    def test_draining_twice_and_unknown_workers_are_refused(self) -> None:
        """Undrain of a serving worker is CONFLICT; an unknown id is NOT_FOUND."""
        shell = CoreShell()
        shell.register("w1")
        with pytest.raises(ControlError) as conflict:
            shell.command("undrain", worker_id="w1")
        assert conflict.value.code is ErrorCode.CONFLICT
        with pytest.raises(ControlError) as missing:
            shell.command("get_worker", worker_id="nobody")
        assert missing.value.code is ErrorCode.NOT_FOUND


class TestAbort:
    """abort: one ABORT to the engine per registered worker, as its owner."""

    def test_a_rid_is_aborted_on_behalf_of_every_worker(self) -> None:
        """The engine gets ABORT rid for each worker's address; the reply names them."""
        shell = CoreShell()
        shell.register("w1")
        shell.register("w2")
        handled = shell.command("abort", rid="r-7")
        assert (handled.reply.rid, handled.reply.sent_for) == ("r-7", ["w1", "w2"])
        owners = []
        for send in handled.effects:
            assert isinstance(send, Send) and send.to == ENGINE
            header = decode_header(send.frames[0])
            assert header.kind is Kind.ABORT and header.rids == ["r-7"]
            owners += header.reply_to
            payload = payload_of(send, AbortRequest)
            assert (payload.rid, payload.abort_all) == ("r-7", False)
            assert payload.reason == "aborted by an operator"
        assert owners == [address_of("w1"), address_of("w2")]

    def test_abort_all_names_no_rid(self) -> None:
        """With abort_all the rid is dropped: every worker's requests end."""
        shell = CoreShell()
        shell.register("w1")
        handled = shell.command("abort", rid="ignored", abort_all=True)
        (send,) = handled.effects
        assert isinstance(send, Send) and decode_header(send.frames[0]).rids == []
        assert payload_of(send, AbortRequest).abort_all
        assert (handled.reply.rid, handled.reply.abort_all) == ("", True)

    def test_neither_rid_nor_abort_all_is_refused(self) -> None:
        """An abort naming nothing is BAD_ARGUMENTS, and sends nothing."""
        with pytest.raises(ControlError) as refused:
            CoreShell().command("abort")
        assert refused.value.code is ErrorCode.BAD_ARGUMENTS


class TestReplies:
    """status, metrics, load and freeze_gc."""

    def test_status_decodes_as_its_catalogued_type(self) -> None:
        """The status reply round-trips through the wire as RouterStatus."""
        shell = CoreShell()
        shell.register("w1")
        shell.command("pause", mode="abort")
        status = shell.command("status").reply
        wire = msgspec.msgpack.decode(msgspec.msgpack.encode(status), type=RouterStatus)
        assert wire == status
        assert (status.paused, status.pause_mode, status.workers) == (True, "abort", {"serving": 1})
        assert status.pending_operations == 1 and status.backlogs == {"engine": 0}

    def test_metrics_reports_workers_and_engine(self) -> None:
        """Metrics list every worker state (zeros too), the live worker up, the engine load."""
        shell = CoreShell()
        shell.register("w1")
        shell.engine_load(running=3, waiting=1, max_running=8, token_usage=0.5)
        metrics = shell.command("metrics").reply
        assert isinstance(metrics, TokenizerRouterMetrics)
        assert metrics.workers_by_state["serving"] == 1 and metrics.workers_by_state["dead"] == 0
        assert [(w.worker, w.up) for w in metrics.workers] == [("w1", 1)]
        assert (metrics.engine.up, metrics.engine.running, metrics.engine.token_usage) == (
            True,
            3,
            0.5,
        )
        assert "pause_barrier_seconds" in metrics.histograms

    def test_load_is_none_before_the_first_report(self) -> None:
        """No snapshot yet: None; then every field, zeros included, and its age."""
        shell = CoreShell()
        assert shell.command("load").reply is None
        shell.engine_load(running=2)
        shell.advance(0.5)
        load = msgspec.to_builtins(shell.command("load").reply)
        assert load["running"] == 2 and load["waiting"] == 0 and load["age_s"] == 0.5

    def test_freeze_gc_freezes_here_and_asks_the_engine(self) -> None:
        """freeze_gc asks the shell to freeze this process and sends FREEZE_GC on."""
        shell = CoreShell()
        handled = shell.command("freeze_gc")
        assert msgspec.to_builtins(handled.reply) == {
            "frozen": ["tokenizer_router"],
            "forwarded_to": ["engine"],
        }
        freeze, send = handled.effects
        assert isinstance(freeze, FreezeGarbageCollector)
        assert isinstance(send, Send) and send.to == ENGINE
        assert decode_header(send.frames[0]).kind is Kind.FREEZE_GC
