"""The control server's guard: a server with the stack key runs nothing for a request
without it, read-only commands included, counted and answered UNAUTHORIZED; every
mutation and every refused request is one audit line in the admin app's format."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from router_core.audit import AuditLog
from router_core.control import (
    DEFERRED,
    AsyncControlClient,
    Command,
    ControlClient,
    ControlError,
    ControlRequest,
    ErrorCode,
    ReplyTo,
)
from router_core.control.guard import MAX_ARGS_CHARS, ControlGuard, args_text, outcome_of
from router_core.control.protocol import ControlReply, decode_reply, encode, ok
from router_core.control.replies import OperationOutcome
from router_core.control.table import AuditedCall
from tests.unit.router_core.control.command_table import (
    COMMANDS,
    WAIT_S,
    AddArgs,
    Clients,
    InlineServer,
    NoArgs,
    TableState,
    ThreadServer,
    ValueArgs,
    receive,
    request,
    run_async,
)

KEY = "0123456789abcdef" * 4
KEY_FILE = "/run/sb/stack.key"


def bump(state: TableState, args: ValueArgs, reply_to: ReplyTo) -> Any:
    """A mutation: hold ``value``; the result is the total of every value held."""
    state.held.append((reply_to, args.value))
    return {"total": sum(value for _, value in state.held)}


def refuse(state: TableState, args: NoArgs, reply_to: ReplyTo) -> Any:
    """A mutation that does not apply now."""
    raise ControlError(ErrorCode.CONFLICT, "not now")


def barrier(state: TableState, args: NoArgs, reply_to: ReplyTo) -> Any:
    """A mutation answered later (by the test, through the server)."""
    state.held.append((reply_to, 0))
    return DEFERRED


#: The tiny table plus three mutations.
GUARDED: Mapping[str, Command[TableState]] = {
    **COMMANDS,
    "bump": Command(bump, ValueArgs, "mutate", mutates=True),
    "refuse": Command(refuse, NoArgs, "mutate, or not", mutates=True),
    "barrier": Command(barrier, NoArgs, "mutate later", mutates=True),
}


class Audited:
    """The audit file a test's server writes, read back as records."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log = AuditLog(logging.getLogger("tests.control.audit"), path)

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = self.path.read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in lines]


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[Audited]:
    """An audit log with a JSON-lines file, closed after the test."""
    found = Audited(tmp_path / "audit.jsonl")
    yield found
    found.log.close()


@pytest.fixture
def keyed(context: zmq.Context[zmq.Socket[bytes]], audited: Audited) -> Iterator[InlineServer]:
    """A server that has the stack key and audits to ``audited``."""
    guard = ControlGuard(key=KEY, key_file=KEY_FILE, audit=audited.log, role="test_router")
    server = InlineServer(context, "inproc://guarded", GUARDED, guard)
    yield server
    server.close()


def _ask(server: InlineServer, clients: Clients, frame: bytes) -> ControlReply:
    sock = clients.connect(zmq.DEALER, server.endpoint)
    sock.send(frame)
    server.pump()
    return decode_reply(receive(sock)[-1])


def _refused(
    actor: str | None, action: str, args: str | None, reason: str, detail: str
) -> dict[str, Any]:
    return {
        "who": actor,
        "via": "control",
        "at": "test_router",
        "action": action,
        "args": args,
        "result": "refused",
        "reason": reason,
        "detail": detail,
    }


class TestKey:
    """Which requests a server with a key runs."""

    @pytest.mark.parametrize("given", ["", "f" * 64, KEY[:-1], KEY + "0"])
    def test_request_without_the_key_runs_nothing(
        self, keyed: InlineServer, clients: Clients, audited: Audited, given: str
    ) -> None:
        """A missing or wrong key is UNAUTHORIZED naming the key file; the mutation is
        not run, the refusal counted and audited with the claimed actor."""
        reply = _ask(keyed, clients, request(3, "bump", key=given, actor="mallory", value=5))
        assert reply.error is not None
        assert (reply.id, reply.error.code, reply.error.name) == (3, 8, "UNAUTHORIZED")
        message = f"this control socket needs the stack key: send the key in {KEY_FILE}"
        assert reply.error.message == message
        assert keyed.state.held == []
        assert keyed.counters.get("rejected", "control_unauthorized") == 1
        assert keyed.counters.total("control_commands") == 0
        assert audited.records() == [
            _refused("mallory", "bump", "value=5", "unauthorized", message)
        ]

    def test_read_only_commands_need_the_key_too(
        self, keyed: InlineServer, clients: Clients
    ) -> None:
        """A read (it leaks state) without the key is refused like a mutation."""
        reply = _ask(keyed, clients, request(4, "add", a=1, b=2))
        assert reply.error is not None and reply.error.code == ErrorCode.UNAUTHORIZED

    def test_the_key_is_checked_before_the_deadline(
        self, keyed: InlineServer, clients: Clients, audited: Audited
    ) -> None:
        """A keyless request past its deadline is still refused and audited, not merely
        dropped as late (its deadline is not believed without the key)."""
        frame = encode(ControlRequest(id=5, command="bump", args={"value": 1}, deadline_ns=1))
        reply = _ask(keyed, clients, frame)
        assert reply.error is not None and reply.error.code == ErrorCode.UNAUTHORIZED
        assert keyed.counters.get("rejected", "control_expired") == 0
        assert [record["result"] for record in audited.records()] == ["refused"]

    def test_request_with_the_key_runs(
        self, keyed: InlineServer, clients: Clients, audited: Audited
    ) -> None:
        """The right key runs the command; a read writes no audit line."""
        reply = _ask(keyed, clients, request(6, "add", key=KEY, a=2, b=3))
        assert reply == ok(6, 5)
        assert keyed.counters.get("rejected", "control_unauthorized") == 0
        assert audited.records() == []

    def test_server_without_a_key_runs_every_request(
        self, inline: InlineServer, clients: Clients
    ) -> None:
        """A server started without a key (no run dir) runs a request that has none."""
        assert _ask(inline, clients, request(7, "add", a=1, b=1)) == ok(7, 2)


class TestAudit:
    """One audit line per mutation run and per refused request."""

    def test_mutation_is_audited_with_its_result(
        self, keyed: InlineServer, clients: Clients, audited: Audited
    ) -> None:
        """A mutation that ran: who, via control, where, the command, its args, ok."""
        reply = _ask(keyed, clients, request(1, "bump", key=KEY, actor="admin:alice", value=2))
        assert reply == ok(1, {"total": 2})
        assert audited.records() == [
            {
                "who": "admin:alice",
                "via": "control",
                "at": "test_router",
                "action": "bump",
                "args": "value=2",
                "result": "ok",
                "reason": None,
                "detail": None,
            }
        ]

    def test_failed_mutation_is_audited_as_an_error(
        self, keyed: InlineServer, clients: Clients, audited: Audited
    ) -> None:
        """A mutation its handler refused is audited ``error`` with the code's name."""
        reply = _ask(keyed, clients, request(2, "refuse", key=KEY, actor="ctl"))
        assert reply.error is not None and reply.error.code == ErrorCode.CONFLICT
        [record] = audited.records()
        assert (record["result"], record["reason"], record["detail"]) == (
            "error",
            "conflict",
            "not now",
        )

    def test_deferred_mutation_is_audited_when_it_starts_and_when_answered(
        self, keyed: InlineServer, clients: Clients, audited: Audited
    ) -> None:
        """A barrier writes ``started`` when run and its outcome when answered."""
        sock = clients.connect(zmq.DEALER, keyed.endpoint)
        sock.send(request(3, "barrier", key=KEY, actor="ctl"))
        keyed.pump()
        assert [record["result"] for record in audited.records()] == ["started"]
        [(reply_to, _)] = keyed.state.held
        keyed.server.answer(reply_to, _outcome(complete=False))
        assert decode_reply(receive(sock)[-1]).ok
        _, answered = audited.records()
        assert (answered["who"], answered["action"], answered["result"]) == (
            "ctl",
            "barrier",
            "timeout",
        )
        assert answered["detail"] == "op op-1 acked=w0 stragglers=engine"

    def test_unknown_command_and_bad_arguments_are_audited_refusals(
        self, keyed: InlineServer, clients: Clients, audited: Audited
    ) -> None:
        """With the key, an unknown command and bad arguments are refused, each audited
        with the arguments as sent."""
        unknown = _ask(keyed, clients, request(1, "nuke", key=KEY, actor="ctl", all=True))
        bad = _ask(keyed, clients, request(2, "bump", key=KEY, actor="ctl", value="x"))
        assert unknown.error is not None and unknown.error.code == ErrorCode.UNKNOWN_COMMAND
        assert bad.error is not None and bad.error.code == ErrorCode.BAD_ARGUMENTS
        first, second = audited.records()
        assert (first["action"], first["args"], first["reason"]) == (
            "nuke",
            "all=true",
            "unknown_command",
        )
        assert (second["action"], second["args"], second["reason"]) == (
            "bump",
            "value=x",
            "bad_arguments",
        )
        assert keyed.state.held == []

    def test_hostile_actor_stays_on_one_line(
        self, keyed: InlineServer, clients: Clients, audited: Audited, caplog: Any
    ) -> None:
        """An actor holding a newline and a forged field cannot start a second line."""
        caplog.set_level(logging.INFO, "tests.control.audit")
        forged = "x\naudit who=root result=ok"
        _ask(keyed, clients, request(1, "bump", key="", actor=forged, value=1))
        lines = [r.getMessage() for r in caplog.records if r.name == "tests.control.audit"]
        assert len(lines) == 1 and "\n" not in lines[0]
        assert audited.records()[0]["who"] == forged


def _outcome(*, complete: bool) -> OperationOutcome:
    return OperationOutcome(
        op_id="op-1",
        seq=1,
        action="pause",
        mode="abort",
        complete=complete,
        acked=["w0"],
        stragglers=[] if complete else ["engine"],
        departed=[],
        elapsed_s=0.5,
        finished_at=0.0,
    )


class TestAuditText:
    """How arguments and outcomes read in an audit line."""

    def test_args_are_short_text(self) -> None:
        """Parsed or as sent, arguments are ``k=v`` words, cut at a bound."""
        assert args_text(AddArgs(a=1, b=2)) == "a=1 b=2"
        assert args_text({"mode": "abort", "nested": {"x": [1]}}) == 'mode=abort nested={"x":[1]}'
        long = args_text({"worker_id": "w" * 1000})
        assert long.startswith("worker_id=www") and long.endswith(" chars)")
        assert len(long) < MAX_ARGS_CHARS + 20

    def test_outcomes(self) -> None:
        """A complete barrier is ok, one that timed out names its stragglers; a result of
        no known shape is ok with no detail."""
        assert outcome_of(_outcome(complete=True)) == ("ok", "op op-1 acked=w0")
        assert outcome_of(_outcome(complete=False))[0] == "timeout"
        assert outcome_of({"total": 1}) == ("ok", "")

    def test_a_guard_without_an_audit_log_records_nothing(self) -> None:
        """record() without a log is a no-op (a server built without a guard)."""
        ControlGuard().record(AuditedCall("a", "bump", ""), "ok")


class TestClients:
    """Both clients send their key and actor with every request."""

    @pytest.fixture
    def keyed_thread(
        self, context: zmq.Context[zmq.Socket[bytes]], run_dir: Path, audited: Audited
    ) -> Iterator[ThreadServer]:
        """A threaded server on an ipc endpoint that has the key and audits."""
        guard = ControlGuard(key=KEY, key_file=KEY_FILE, audit=audited.log, role="test_router")
        server = ThreadServer(context, f"ipc://{run_dir}/keyed", guard)
        server.start()
        yield server
        server.stop()

    def test_blocking_client(
        self, keyed_thread: ThreadServer, context: zmq.Context[zmq.Socket[bytes]]
    ) -> None:
        """Without the key a call raises UNAUTHORIZED; with it, it runs."""
        endpoint = keyed_thread.endpoint
        with ControlClient(endpoint, timeout_s=WAIT_S, context=context) as keyless:
            with pytest.raises(ControlError) as refused:
                keyless._call("add", a=1, b=2)
            assert refused.value.code == ErrorCode.UNAUTHORIZED
            assert KEY_FILE in refused.value.message
        with ControlClient(endpoint, timeout_s=WAIT_S, context=context, key=KEY) as client:
            assert client._call("add", a=1, b=2) == 3

    def test_async_client_sends_its_actor_or_the_call_s(
        self, keyed_thread: ThreadServer, audited: Audited
    ) -> None:
        """The async client's actor is in the audit line of an unknown command, and a
        call's own actor replaces it for that call."""

        async def scenario() -> None:
            actx = zmq.asyncio.Context()
            try:
                async with AsyncControlClient(
                    keyed_thread.endpoint, context=actx, key=KEY, actor="admin"
                ) as client:
                    assert await client._call("add", a=2, b=2) == 4
                    for actor in (None, "admin:alice"):
                        with pytest.raises(ControlError):
                            await client._call("nuke", actor=actor)
            finally:
                actx.term()

        run_async(scenario())
        assert [record["who"] for record in audited.records()] == ["admin", "admin:alice"]
