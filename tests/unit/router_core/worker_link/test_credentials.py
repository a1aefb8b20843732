"""The worker's credentials: the stack key in its registration, its registration's secret
in everything after it, and what a refusal for want of the key does — pure state."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from router_core.counters import Counters
from router_core.wire import Kind, decode_header, decode_payload, frame_message
from router_core.wire.control import (
    Acknowledgement,
    Deregistration,
    Heartbeat,
    PauseContinueBroadcast,
    RegistrationReply,
    WorkerRegistration,
)
from router_core.worker_link import WorkerIdentity, WorkerSession
from router_core.worker_link.dispatch import InboundDispatch
from router_core.worker_link.effects import Instant

ADDRESS = "ipc:///tmp/sb-unit/worker-w0"
KEY = "k" * 64


def payload(frames: list[bytes]) -> Any:
    """The payload of one framed control message."""
    return decode_payload(decode_header(frames[0]).kind, frames[1])


def make_session(key: str | None = KEY) -> WorkerSession:
    identity = WorkerIdentity("w0", ADDRESS, pid=1, host="box", version="1", started_ns=5)
    return WorkerSession(identity, key=key)


def accepted(secret: str, incarnation: int = 5) -> RegistrationReply:
    return RegistrationReply(
        worker_id="w0", accepted=True, op_id=f"{incarnation}-1", incarnation=incarnation,
        secret=secret,
    )  # fmt: skip


class TestKeyAndSecret:
    """What the session sends carries the key, then the secret."""

    def test_the_registration_carries_the_key(self) -> None:
        """The stack key goes in every registration; none without a key."""
        registration = payload(make_session().registration())
        assert isinstance(registration, WorkerRegistration) and registration.key == KEY
        assert payload(make_session(None).registration()).key == ""

    def test_heartbeats_acks_and_the_deregistration_carry_the_secret(self) -> None:
        """After an accepted reply, each of them carries its secret."""
        session = make_session()
        session.on_registration_reply(accepted("s1"))
        beat = payload(session.heartbeat())
        (ack_frames,) = session.on_pause_broadcast(PauseContinueBroadcast("5-2", True, "abort"))
        ack = payload(ack_frames)
        leaving = payload(session.deregistration())
        assert isinstance(beat, Heartbeat) and beat.secret == "s1"
        assert isinstance(ack, Acknowledgement) and ack.secret == "s1"
        assert isinstance(leaving, Deregistration) and leaving.secret == "s1"

    def test_a_new_accepted_reply_replaces_the_secret(self) -> None:
        """Registered again (a router restart): the new reply's secret is used."""
        session = make_session()
        session.on_registration_reply(accepted("s1", incarnation=5))
        session.on_registration_reply(accepted("s2", incarnation=6))
        assert payload(session.heartbeat()).secret == "s2"

    def test_the_key_never_goes_in_a_heartbeat(self) -> None:
        """Only the registration carries the key."""
        session = make_session()
        session.on_registration_reply(accepted("s1"))
        assert KEY.encode() not in b"".join(session.heartbeat())


class TestBadKeyRefusal:
    """A refusal for want of the key waits for the timer; a forged one changes nothing."""

    def test_a_bad_key_refusal_is_not_answered_at_once(self) -> None:
        """Not registered, nothing sent back (the timer retries), the refusal noted."""
        session = make_session()
        refusal = RegistrationReply(worker_id="w0", accepted=False, reason="bad_key")
        assert session.on_registration_reply(refusal) == []
        assert not session.registered and session.refusal == "bad_key"

    def test_a_bad_key_refusal_while_registered_is_ignored(self) -> None:
        """A real one follows an 'unknown worker' refusal; this one is a forgery."""
        session = make_session()
        session.on_registration_reply(accepted("s1"))
        refusal = RegistrationReply(worker_id="w0", accepted=False, reason="bad_key")
        assert session.on_registration_reply(refusal) == []
        assert session.registered and session.refusal == ""
        assert payload(session.heartbeat()).secret == "s1"

    def test_an_unknown_worker_refusal_still_registers_again_at_once(self) -> None:
        """The router forgot us (it restarted): a registration is sent back at once."""
        session = make_session()
        session.on_registration_reply(accepted("s1"))
        refusal = RegistrationReply(
            worker_id="w0", accepted=False, reason="unknown worker; register"
        )
        (frames,) = session.on_registration_reply(refusal)
        assert decode_header(frames[0]).kind is Kind.REGISTER and not session.registered

    def test_the_link_logs_a_bad_key_once_per_refused_spell(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Refused every retry: one error line naming the fix, until accepted again."""
        session = make_session(None)
        counters = Counters()
        dispatch = InboundDispatch(session, {}, counters)
        refusal = frame_message(
            Kind.REGISTER_REPLY, RegistrationReply(worker_id="w0", accepted=False, reason="bad_key")
        )
        with caplog.at_level(logging.ERROR, "router_core.worker_link.dispatch"):
            for _ in range(3):
                dispatch.on_message(decode_header(refusal[0]), list(refusal), Instant(0.0, 0.0))
        (line,) = [record.getMessage() for record in caplog.records]
        assert "'bad_key'" in line and "--key-file" in line
        assert counters.get("registration_replies", "refused") == 3


class TestIdentity:
    """A worker id the router would refuse is refused where the worker is made."""

    @pytest.mark.parametrize("worker_id", ["", "w\n0", "w" * 65, "-w"])
    def test_a_bad_worker_id_is_a_value_error(self, worker_id: str) -> None:
        """``WorkerIdentity`` checks the identifier rule."""
        with pytest.raises(ValueError, match="worker id"):
            WorkerIdentity(worker_id, ADDRESS, pid=1, host="h", version="1", started_ns=1)
