"""Forged control messages against the router's handlers: each finding of issue 12 is
reproduced on a router without the protection (what it did before) and refused, counted,
by one with it — in-process, no sockets.

Every forger here lacks what a local process of another user lacks: the stack key, and
the secret the router gave a worker at its registration.
"""

from __future__ import annotations

import logging

import pytest

from router_core.wire import Kind
from router_core.wire.control import (
    ENGINE,
    Heartbeat,
    LoadSnapshot,
    RegistrationReply,
    UpstreamIncarnation,
)
from tests.unit.router_core.tokenizer_router.shell import (
    KEY,
    CoreShell,
    address_of,
    answers,
    payload_of,
    sends,
)


def keyed(*workers: str, heartbeat_timeout_s: float = 5.0) -> CoreShell:
    """A router with the stack key, ``workers`` registered honestly, a live engine."""
    shell = CoreShell(key=KEY, heartbeat_timeout_s=heartbeat_timeout_s)
    for worker in workers:
        shell.register(worker)
    shell.engine_load(running=1)
    return shell


def rejected(shell: CoreShell, reason: str) -> int:
    return shell.core.counters.get("rejected", reason)


class TestForgedRegistration:
    """Finding: a fake worker registers and makes every pause answer 504."""

    def test_without_the_key_a_fake_worker_joined_every_barrier(self) -> None:
        """A router without a key (as before) takes a registration from anyone: the fake
        worker is a barrier participant, so a pause waits for it and times out."""
        shell = CoreShell(heartbeat_timeout_s=60.0)
        shell.register("w0")
        shell.register("fake")
        shell.command("pause", mode="abort")
        shell.ack("w0", "1-1")
        shell.advance(6.0)
        (answer,) = answers(shell.tick())
        assert (answer.outcome.complete, answer.outcome.stragglers) == (False, ["fake"])

    def test_a_registration_without_the_key_is_refused_and_answered_bad_key(self) -> None:
        """Refused (counted bad_key), not registered, and told why through a one-off
        socket; the pause then completes with the real worker alone."""
        shell = keyed("w0")
        (refusal,) = sends(shell.register("fake", key=""))
        assert refusal.once and refusal.to == address_of("fake")
        reply = payload_of(refusal, RegistrationReply)
        assert (reply.accepted, reply.reason, reply.secret) == (False, "bad_key", "")
        assert shell.core.registry.get("fake") is None and rejected(shell, "bad_key") == 1
        shell.command("pause", mode="abort")
        shell.ack("w0", "1-1")
        (answer,) = answers(shell.ack(ENGINE, "1-1"))
        assert answer.outcome.complete is True and answer.outcome.acked == ["engine", "w0"]

    def test_a_wrong_key_is_refused_too(self) -> None:
        """Any key but the stack's is refused the same way."""
        shell = keyed()
        shell.register("fake", key="f" * 64)
        assert shell.core.registry.get("fake") is None and rejected(shell, "bad_key") == 1

    def test_a_keyless_registration_at_a_real_workers_address_gets_no_reply(self) -> None:
        """A forger using a registered worker's address is refused without a reply: the
        real worker is never told it was refused."""
        shell = keyed("w0")
        assert shell.register("w0", key="") == [] and rejected(shell, "bad_key") == 1
        record = shell.core.registry.get("w0")
        assert record is not None and record.secret == shell.secrets["w0"]


class TestForgedHeartbeat:
    """Finding: a forged heartbeat keeps a stalled worker serving, or drains another."""

    def test_a_heartbeat_without_the_secret_no_longer_keeps_a_stalled_worker_alive(self) -> None:
        """The stalled worker sends nothing; forged heartbeats in its name are refused
        (bad_secret) and it dies at the timeout, as it should."""
        shell = keyed("w0", "stalled")
        for _ in range(6):
            shell.advance(1.0)
            shell.heartbeat("w0")
            assert shell.heartbeat("stalled", secret="") == []
            shell.tick()
        assert shell.core.registry.get("stalled") is None
        assert rejected(shell, "bad_secret") == 6
        assert shell.core.counters.get("dead_workers", "heartbeat_timeout") == 1

    def test_a_forged_drained_heartbeat_leaves_the_worker_serving(self) -> None:
        """A forged ``drained`` heartbeat does not change the named worker's state."""
        shell = keyed("w0")
        shell.heartbeat("w0", state="drained", secret="0" * 32)
        record = shell.core.registry.get("w0")
        assert record is not None and record.state == "serving"
        assert record.heartbeats == 0 and rejected(shell, "bad_secret") == 1

    def test_a_router_without_a_key_checks_the_secrets_too(self) -> None:
        """Per-registration secrets need no stack key: the same forgery is refused."""
        shell = CoreShell()
        shell.register("w0")
        shell.heartbeat("w0", state="drained", secret="")
        assert shell.core.registry.get("w0").state == "serving"  # type: ignore[union-attr]
        assert rejected(shell, "bad_secret") == 1


class TestForgedAcknowledgement:
    """Finding: a forged ack in a stalled worker's name makes a pause 'complete'."""

    def test_an_ack_without_the_secret_leaves_the_straggler_named(self) -> None:
        """The forged ack is refused (bad_secret); the pause times out naming the stalled
        worker, and is recorded as a timeout, not as complete."""
        shell = keyed("w0", "stalled", heartbeat_timeout_s=60.0)
        shell.command("pause", mode="abort")
        shell.ack("w0", "1-1")
        shell.ack(ENGINE, "1-1")
        assert answers(shell.ack("stalled", "1-1", secret="")) == []
        assert rejected(shell, "bad_secret") == 1
        shell.advance(6.0)
        (answer,) = answers(shell.tick())
        assert (answer.outcome.complete, answer.outcome.stragglers) == (False, ["stalled"])
        assert shell.core.pause.finished == {("pause", "abort", "timeout"): 1}

    def test_an_ack_from_no_registered_worker_is_refused(self) -> None:
        """An ack naming nobody registered is counted unknown_worker and applied nowhere."""
        shell = keyed("w0")
        shell.command("pause", mode="abort")
        assert shell.ack("ghost", "1-1", secret="") == []
        assert rejected(shell, "unknown_worker") == 1

    def test_an_engine_ack_without_the_key_is_refused(self) -> None:
        """An ack as the engine, on its socket, without the stack key: bad_engine_key."""
        shell = keyed("w0")
        shell.command("pause", mode="abort")
        shell.ack("w0", "1-1")
        assert shell.ack(ENGINE, "1-1", secret="") == []
        assert rejected(shell, "bad_engine_key") == 1
        assert [op.op_id for op in shell.core.pause.pending] == ["1-1"]


class TestForgedLoadSnapshot:
    """Finding: one forged snapshot with a new engine_started_ns aborts every stream."""

    def test_without_the_key_a_new_incarnation_reached_every_worker(self) -> None:
        """A router without a key (as before) passes the forgery on to every worker."""
        shell = CoreShell()
        shell.register("w0")
        shell.engine_load(engine_started_ns=1)
        out = sends(shell.engine_load(engine_started_ns=999))
        assert [send.to for send in out] == [address_of("w0")]

    def test_a_snapshot_without_the_key_is_refused_and_goes_nowhere(self) -> None:
        """Refused (bad_engine_key): nothing is sent, the kept snapshot is the engine's."""
        shell = keyed("w0")
        shell.engine_load(engine_started_ns=1, step=5)
        assert shell.engine_load(engine_started_ns=999, secret="") == []
        assert rejected(shell, "bad_engine_key") == 1
        latest = shell.core.engine.latest_load
        assert latest is not None and latest.engine_started_ns == 1

    def test_a_forged_snapshot_does_not_make_a_dead_engine_live(self) -> None:
        """The engine's liveness moves only with its own messages."""
        shell = CoreShell(key=KEY)
        shell.engine_load(secret="nope")
        assert shell.core.engine.seen_at is None

    def test_the_key_stops_at_the_router(self) -> None:
        """Workers get the snapshot without the key; ``load`` shows no key either."""
        shell = keyed("w0")
        (send,) = sends(shell.engine_load(step=7))
        forwarded = payload_of(send, LoadSnapshot)
        assert forwarded.step == 7 and forwarded.secret == ""
        assert KEY.encode() not in b"".join(bytes(frame) for frame in send.frames)
        assert "secret" not in shell.command("load").reply.__struct_fields__
        latest = shell.core.engine.latest_load
        assert latest is not None and latest.secret == ""


class TestForgedBeacon:
    """Finding: forged UPSTREAM beacons make the workers suspect their streams."""

    def test_without_the_key_a_forged_incarnation_reached_every_worker(self) -> None:
        """A router without a key (as before) passes a forged restart on."""
        shell = CoreShell()
        shell.register("w0")
        news = UpstreamIncarnation("detokenizer-0", 10**19)
        assert sends(shell.deliver(shell.core.worker_messages, Kind.UPSTREAM, news))

    def test_a_beacon_without_the_key_is_refused_and_not_remembered(self) -> None:
        """Refused (bad_upstream_key); the real beacon after it is still news."""
        shell = keyed("w0")
        forged = UpstreamIncarnation("detokenizer-0", 10**19)
        assert shell.deliver(shell.core.worker_messages, Kind.UPSTREAM, forged) == []
        assert rejected(shell, "bad_upstream_key") == 1 and shell.core.upstream.latest() == {}
        real = UpstreamIncarnation("detokenizer-0", 5, key=KEY)
        (send,) = sends(shell.deliver(shell.core.worker_messages, Kind.UPSTREAM, real))
        assert payload_of(send, UpstreamIncarnation) == UpstreamIncarnation("detokenizer-0", 5)


class TestForgedIdentifiers:
    """Finding: worker ids from the wire had no charset or length limit, logged raw."""

    @pytest.mark.parametrize(
        "worker_id",
        ["w0\naudit forged=1", "w 0", "-w0", ".hidden", "w" * 65, "wö", "w0/../x", "engine"],
    )
    def test_a_worker_id_breaking_the_rule_is_refused(self, worker_id: str) -> None:
        """Refused (bad_worker_id) with no reply, even with the key."""
        shell = keyed()
        assert shell.register(worker_id) == []
        assert len(shell.core.registry) == 0 and rejected(shell, "bad_worker_id") == 1

    def test_the_longest_and_oddest_valid_ids_are_accepted(self) -> None:
        """64 characters, dots, dashes and underscores: registered."""
        shell = keyed()
        for worker_id in ("w" * 64, "a.b_c-D9", "0"):
            assert sends(shell.register(worker_id)), worker_id
        assert len(shell.core.registry) == 3

    @pytest.mark.parametrize(
        ("fields", "reason"),
        [
            ({"host": "h\nx"}, "bad_host"),
            ({"host": "h" * 256}, "bad_host"),
            ({"version": "1\r\n2"}, "bad_version"),
            ({"version": "v" * 65}, "bad_version"),
        ],
    )
    def test_a_bad_host_or_version_is_refused(self, fields: dict[str, str], reason: str) -> None:
        """Host and version are short printable text, or the registration is refused."""
        shell = keyed()
        assert shell.register("w0", **fields) == []
        assert rejected(shell, reason) == 1

    def test_an_address_with_a_newline_or_too_long_is_refused(self) -> None:
        """The address is bounded printable text too (bad_address)."""
        shell = keyed()
        for address in ("ipc:///run/sb/w\n0", "ipc:///run/sb/" + "x" * 600):
            assert shell.register("w0", address) == []
        assert rejected(shell, "bad_address") == 2

    def test_the_refusal_log_line_escapes_the_claimed_id(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The id is shown escaped on one line: a newline in it forges no line."""
        shell = keyed()
        with caplog.at_level(logging.WARNING, "router_core.tokenizer_router.peers"):
            shell.register("w0\n2026-12-02 INFO audit forged")
        (line,) = [record.getMessage() for record in caplog.records]
        assert "\n" not in line and "'w0\\n2026-12-02 INFO audit forged'" in line

    def test_an_unknown_heartbeat_with_a_bad_id_gets_no_reply(self) -> None:
        """A heartbeat from an unknown worker with a bad id is refused, not answered."""
        shell = keyed()
        beat = Heartbeat(worker_id="x\ny", address=address_of("x"))
        assert shell.deliver(shell.core.worker_messages, Kind.HEARTBEAT, beat) == []
        assert rejected(shell, "bad_worker_id") == 1


class TestRefusalLog:
    """A flood of forgeries is counted in full and logged at most once per interval."""

    def test_one_line_per_reason_per_interval(self, caplog: pytest.LogCaptureFixture) -> None:
        """1000 forged heartbeats: 1000 counted, one line; after 10 s the next line says
        how many were not logged."""
        shell = keyed("w0")
        with caplog.at_level(logging.WARNING, "router_core.tokenizer_router.peers"):
            for _ in range(1000):
                shell.heartbeat("w0", secret="")
            shell.advance(10.0)
            shell.heartbeat("w0", secret="")
        assert rejected(shell, "bad_secret") == 1001
        lines = [record.getMessage() for record in caplog.records]
        assert len(lines) == 2 and "999 more refused" in lines[1]
