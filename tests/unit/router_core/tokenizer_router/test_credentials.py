"""The honest side of the router's credentials: keys and secrets as real peers use them,
re-registrations and router restarts, a router without a key — in-process, no sockets."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from router_core.tokenizer_router.effects import Effect
from router_core.tokenizer_router.settings import RouterSettings
from router_core.wire import Kind
from router_core.wire.control import ENGINE, RegistrationReply, UpstreamIncarnation
from tests.unit.router_core.tokenizer_router.shell import (
    ENDPOINTS,
    KEY,
    CoreShell,
    address_of,
    answers,
    payload_of,
    sends,
)


def reply_of(effects: Sequence[Effect]) -> RegistrationReply:
    """The registration reply among ``effects``."""
    reply: RegistrationReply = payload_of(sends(effects)[0], RegistrationReply)
    return reply


class TestHonestPeers:
    """With the key and the secrets, everything works as it did without them."""

    def test_a_whole_session_is_accepted_and_nothing_is_refused(self) -> None:
        """Register, heartbeat, pause and continue with the engine, a beacon, deregister:
        no ``rejected`` counter at all."""
        shell = CoreShell(key=KEY)
        shell.register("w0")
        shell.register("w1")
        shell.engine_load(running=1)
        shell.heartbeat("w0")
        for name, args in (("pause", {"mode": "abort"}), ("continue", {})):
            shell.command(name, **args)
            (pending,) = shell.core.pause.pending
            op = pending.op_id
            shell.ack("w0", op)
            shell.ack("w1", op)
            (answer,) = answers(shell.ack(ENGINE, op))
            assert answer.outcome.complete is True
        beacon = UpstreamIncarnation("detokenizer-router", 5, key=KEY)
        assert sends(shell.deliver(shell.core.worker_messages, Kind.UPSTREAM, beacon))
        assert shell.deregister("w1")
        assert "rejected" not in shell.core.counters.snapshot()
        assert [record.worker_id for record in shell.core.registry.workers()] == ["w0"]

    def test_each_registration_gets_its_own_secret(self) -> None:
        """Secrets are 32 hex digits, one per worker, and never in a view or a repr."""
        shell = CoreShell(key=KEY)
        first, second = reply_of(shell.register("w0")), reply_of(shell.register("w1"))
        assert len(first.secret) == 32 and int(first.secret, 16) >= 0
        assert first.secret != second.secret
        record = shell.core.registry.get("w0")
        assert record is not None and record.secret == first.secret
        assert first.secret not in repr(record)
        view = msgspec.json.encode(shell.core.view.workers(shell.at, include_departed=True))
        assert first.secret.encode() not in view and b"secret" not in view


class TestReRegistration:
    """The secret follows the worker process: kept on a repeat, new for a new process."""

    def test_a_repeated_registration_keeps_the_secret(self) -> None:
        """A registration sent again by the same process (same address, pid and start):
        the same secret, so its heartbeats sent meanwhile stay valid."""
        shell = CoreShell(key=KEY)
        secret = reply_of(shell.register("w0", started_ns=7)).secret
        assert reply_of(shell.register("w0", started_ns=7)).secret == secret
        shell.heartbeat("w0")
        assert shell.core.counters.get("rejected", "bad_secret") == 0

    def test_a_new_process_of_the_worker_gets_a_new_secret(self) -> None:
        """The worker restarted (new pid): a new secret; the old one is refused."""
        shell = CoreShell(key=KEY)
        old = reply_of(shell.register("w0", pid=1)).secret
        new = reply_of(shell.register("w0", pid=2)).secret
        assert new != old
        assert shell.heartbeat("w0", secret=old) == []
        assert shell.core.counters.get("rejected", "bad_secret") == 1
        shell.heartbeat("w0", secret=new)
        assert shell.core.registry.get("w0").heartbeats == 1  # type: ignore[union-attr]

    def test_a_repeat_refreshes_host_version_and_start(self) -> None:
        """A repeated registration refreshes the record's host, version and start."""
        shell = CoreShell(key=KEY)
        shell.register("w0", host="a", version="1", started_ns=1)
        shell.register("w0", host="b", version="2", started_ns=2)
        record = shell.core.registry.get("w0")
        assert record is not None
        assert (record.host, record.version, record.started_ns) == ("b", "2", 2)

    def test_after_a_router_restart_the_worker_registers_again_with_a_new_secret(self) -> None:
        """A new router knows neither the worker nor its secret: the old secret's
        heartbeat is answered 'register again', and the new registration is accepted
        with a new secret and the new incarnation (issue 11's path)."""
        before = CoreShell(key=KEY, incarnation=1)
        old = reply_of(before.register("w0")).secret
        after = CoreShell(key=KEY, incarnation=2)
        (again,) = sends(after.heartbeat("w0", secret=old))
        assert again.once and again.to == address_of("w0")
        refusal = payload_of(again, RegistrationReply)
        assert (refusal.accepted, refusal.reason) == (False, "unknown worker; register")
        accepted = reply_of(after.register("w0"))
        assert accepted.incarnation == 2 and accepted.secret not in ("", old)


class TestWithoutAKey:
    """A router with no key accepts keyless peers, but still checks secrets."""

    def test_keyless_registrations_engine_messages_and_beacons_are_accepted(self) -> None:
        """No key anywhere: a worker registers, the engine reports, a beacon is news."""
        shell = CoreShell()
        assert reply_of(shell.register("w0")).accepted
        shell.engine_load(step=1)
        assert shell.core.engine.latest_load is not None
        beacon = UpstreamIncarnation("detokenizer-0", 5)
        assert sends(shell.deliver(shell.core.worker_messages, Kind.UPSTREAM, beacon))
        assert "rejected" not in shell.core.counters.snapshot()
        assert not shell.core.peers.authenticated

    def test_a_key_sent_to_a_router_without_one_is_ignored(self) -> None:
        """A peer configured with a key still works with a keyless router."""
        shell = CoreShell()
        assert reply_of(shell.register("w0", key=KEY)).accepted

    def test_allow_remote_needs_a_key(self) -> None:
        """Remote peers and no key: the settings refuse to build, naming the fix."""
        with pytest.raises(ValueError, match="--allow-remote needs a stack key"):
            RouterSettings(endpoints=ENDPOINTS, allow_remote=True)
        assert RouterSettings(endpoints=ENDPOINTS, allow_remote=True, key=KEY).key == KEY

    def test_the_key_is_not_in_the_settings_repr(self) -> None:
        """Settings logged or shown never carry the key."""
        assert KEY not in repr(RouterSettings(endpoints=ENDPOINTS, key=KEY))
