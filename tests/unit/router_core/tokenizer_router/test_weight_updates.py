"""``update_weights`` through the router's core: pause, load, continue as one barrier,
answered once after the last step; a failed load or a pause that does not complete
keeps the old weights and still continues; the version and an owed continue outlive
the router. No sockets, no sleeps."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from router_core.control.protocol import ControlError, ErrorCode
from router_core.control.replies import UpdateWeightsReply
from router_core.control.table import DEFERRED
from router_core.tokenizer_router.effects import Answer, Effect, Fail
from router_core.wire import Kind, decode_header
from router_core.wire.control import ENGINE, PauseContinueBroadcast
from router_core.wire.engine_commands import CommandReply, EngineCommand
from tests.unit.router_core.tokenizer_router.shell import KEY, CoreShell, payload_of, sends


def kinds(effects: list[Effect]) -> list[Kind]:
    return [decode_header(send.frames[0]).kind for send in sends(effects)]


def sent(effects: list[Effect], kind: Kind, struct: type[Any]) -> Any:
    (found,) = [s for s in sends(effects) if decode_header(s.frames[0]).kind is kind]
    return payload_of(found, struct)


def reply(shell: CoreShell, **fields: Any) -> list[Effect]:
    fields.setdefault("secret", KEY)
    return shell.deliver(shell.core.engine_events, Kind.COMMAND_REPLY, CommandReply(**fields))


def fails(effects: list[Effect]) -> list[Fail]:
    return [effect for effect in effects if isinstance(effect, Fail)]


def answers(effects: list[Effect]) -> list[Answer]:
    return [effect for effect in effects if isinstance(effect, Answer)]


@pytest.fixture
def shell() -> CoreShell:
    live = CoreShell(key=KEY)
    live.register("w0")
    live.engine_load(engine_started_ns=1)
    return live


def paused(shell: CoreShell, **args: Any) -> EngineCommand:
    """Start an update and acknowledge its pause: the load the engine is then sent."""
    handled = shell.command("update_weights", **args)
    assert handled.reply is DEFERRED
    pause = sent(handled.effects, Kind.PAUSE_BROADCAST, PauseContinueBroadcast)
    assert pause.is_pause and pause.mode == args.get("mode", "retract")
    shell.ack("w0", pause.op_id)
    effects = shell.ack(ENGINE, pause.op_id)
    return sent(effects, Kind.ENGINE_COMMAND, EngineCommand)


def resumed(shell: CoreShell, effects: list[Effect]) -> list[Effect]:
    """Acknowledge the continue among ``effects``: what that answered."""
    resume = sent(effects, Kind.PAUSE_BROADCAST, PauseContinueBroadcast)
    assert not resume.is_pause
    shell.ack("w0", resume.op_id)
    return shell.ack(ENGINE, resume.op_id)


class TestUpdate:
    def test_pause_load_continue_then_one_answer(self, shell: CoreShell) -> None:
        load = paused(shell, version="v2", mode="in_place")
        assert (load.command, load.args["version"], load.args["mode"]) == (
            "update_weights",
            "v2",
            "in_place",
        )
        loaded = reply(shell, op_id=load.op_id, ok=True, result={"version": "v2", "model": ""})
        assert answers(loaded) == []  # not before generation is back
        (answer,) = answers(resumed(shell, loaded))
        outcome = answer.outcome
        assert isinstance(outcome, UpdateWeightsReply)
        assert (outcome.version, outcome.previous_version) == ("v2", "")
        assert outcome.paused.complete and outcome.resumed is not None and outcome.resumed.complete
        assert shell.core.durable_state().weight_version == "v2"
        assert not shell.core.durable_state().resume_owed
        status = shell.command("status").reply
        assert status.weight_version == "v2"

    def test_a_failed_load_keeps_the_old_weights_and_continues(self, shell: CoreShell) -> None:
        load = paused(shell, model="/no/such.gguf")
        failed = reply(
            shell, op_id=load.op_id, ok=False, code="bad_arguments", message="no readable file"
        )
        (fail,) = fails(resumed(shell, failed))
        assert fail.code is ErrorCode.BAD_ARGUMENTS
        assert "/no/such.gguf: no readable file" in fail.message
        assert "old weights" in fail.message and "generation resumed" in fail.message
        assert shell.core.weights.version == "" and not shell.core.pause.state.paused

    def test_a_pause_that_does_not_complete_changes_nothing(self, shell: CoreShell) -> None:
        handled = shell.command("update_weights", version="v2", timeout_s=1.0)
        pause = sent(handled.effects, Kind.PAUSE_BROADCAST, PauseContinueBroadcast)
        shell.ack(ENGINE, pause.op_id)  # w0 never acknowledges
        shell.advance(1.5)
        effects = shell.tick()
        assert Kind.ENGINE_COMMAND not in kinds(effects)
        (fail,) = fails(resumed(shell, effects))
        assert fail.code is ErrorCode.ENGINE_TIMEOUT and "w0" in fail.message
        assert shell.core.weights.version == ""

    def test_an_engine_restart_during_the_load_is_a_failure(self, shell: CoreShell) -> None:
        paused(shell, version="v2")
        effects = shell.engine_load(engine_started_ns=2)
        (fail,) = fails(resumed(shell, effects))
        assert fail.code is ErrorCode.ENGINE_FAILED and "restarted" in fail.message

    def test_already_paused_stays_paused(self, shell: CoreShell) -> None:
        """An update of a paused stack loads and leaves it paused for its operator."""
        first = shell.command("pause", mode="retract")
        op = sent(first.effects, Kind.PAUSE_BROADCAST, PauseContinueBroadcast).op_id
        shell.ack("w0", op)
        shell.ack(ENGINE, op)
        load = paused(shell, version="v3")
        (answer,) = answers(reply(shell, op_id=load.op_id, ok=True, result={"version": "v3"}))
        assert isinstance(answer.outcome, UpdateWeightsReply) and answer.outcome.resumed is None
        assert shell.core.pause.state.paused

    def test_one_at_a_time(self, shell: CoreShell) -> None:
        shell.command("update_weights", version="v2")
        with pytest.raises(ControlError) as caught:
            shell.command("update_weights", version="v3")
        assert caught.value.code is ErrorCode.CONFLICT

    def test_no_engine_is_refused_at_once(self) -> None:
        with pytest.raises(ControlError) as caught:
            CoreShell(key=KEY).command("update_weights", version="v2")
        assert caught.value.code is ErrorCode.ENGINE_FAILED


class TestRestart:
    def test_a_router_killed_mid_update_continues_in_its_successor(self, shell: CoreShell) -> None:
        """The pause went out and the router died: the next one continues, once."""
        shell.command("update_weights", version="v2")
        saved = shell.core.durable_state()
        assert saved.paused and saved.resume_owed
        heir = CoreShell(
            key=KEY,
            restored=msgspec.json.decode(msgspec.json.encode(saved), type=type(saved)),
            incarnation=2,
        )
        heir.register("w0")
        assert fails(heir.tick()) == [] and Kind.PAUSE_BROADCAST not in kinds(heir.tick())
        heir.engine_load(engine_started_ns=1, weight_version="v2")
        effects = heir.tick()
        resume = sent(effects, Kind.PAUSE_BROADCAST, PauseContinueBroadcast)
        assert not resume.is_pause
        assert not heir.core.durable_state().resume_owed
        assert Kind.PAUSE_BROADCAST not in kinds(heir.tick())
        assert heir.core.weights.version == "v2"  # what the engine says it serves

    def test_the_version_is_restored(self) -> None:
        from router_core.tokenizer_router.durable import DurableState

        restored = DurableState(incarnation=1, weight_version="v7", weight_model="/m/v7.gguf")
        heir = CoreShell(key=KEY, restored=restored, incarnation=2)
        assert heir.command("status").reply.weight_version == "v7"


def test_a_worker_that_registers_later_learns_the_version(shell: CoreShell) -> None:
    """With its registration reply, a new worker gets the engine's latest load, key
    removed, which names the weights serving."""
    from router_core.wire.control import LoadSnapshot

    shell.engine_load(engine_started_ns=1, weight_version="v9", context_length=512)
    effects = shell.register("late")
    load = sent(effects, Kind.LOAD, LoadSnapshot)
    assert (load.weight_version, load.context_length, load.secret) == ("v9", 512, "")


def test_a_version_the_engine_reports_is_adopted_without_the_old_file() -> None:
    """Restored v7 from /m/v7.gguf, the engine says it serves v8: v8, file unknown."""
    from router_core.tokenizer_router.durable import DurableState

    restored = DurableState(incarnation=1, weight_version="v7", weight_model="/m/v7.gguf")
    heir = CoreShell(key=KEY, restored=restored, incarnation=2)
    heir.engine_load(engine_started_ns=1, weight_version="v8")
    assert (heir.core.weights.version, heir.core.weights.model) == ("v8", "")
    assert heir.core.durable_state().weight_model == ""
