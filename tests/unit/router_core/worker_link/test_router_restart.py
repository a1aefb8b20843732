"""The worker link's core across router restarts and reordered pause operations,
in-process with the real core and codec.

A restarted router starts its operation sequence afresh under a higher incarnation: a
worker that compared bare sequence numbers (or trusted only its first router) would
refuse the new router's pause. Operations are applied in ``op_order`` (incarnation, then
sequence); an older one arriving late is acknowledged but changes nothing.
"""

from __future__ import annotations

from router_core.wire import Kind
from router_core.wire.control import PauseContinueBroadcast
from router_core.worker_link.dispatch import RESEND_FAILED, RESENT
from router_core.worker_link.effects import Send, SessionChanged
from tests.unit.router_core.worker_link.core_driver import CoreDriver, sends


def pause(driver: CoreDriver, op_id: str, is_pause: bool = True) -> list[object]:
    """A pause (or continue) broadcast ``op_id``, in place."""
    mode = "in_place" if is_pause else None
    op = PauseContinueBroadcast(op_id, is_pause, mode)  # type: ignore[arg-type]
    return list(driver.control(Kind.PAUSE_BROADCAST, op))


class TestOpOrder:
    """Pause and continue operations are applied in (incarnation, sequence) order."""

    def test_a_late_older_operation_is_acked_but_not_applied(self) -> None:
        """A continue 5-1 arriving after pause 5-2 leaves the worker paused, and is
        still acknowledged (its barrier must not wait for us)."""
        driver = CoreDriver()
        driver.reply(5)
        pause(driver, "5-2")
        effects = driver.control(Kind.PAUSE_BROADCAST, PauseContinueBroadcast("5-1", False))
        assert driver.session.paused and driver.session.last_op == (5, 2)
        assert sends(effects) == [("control", Kind.ACK)]

    def test_sequence_compares_as_numbers(self) -> None:
        """Operation 5-10 is newer than 5-9 (not a string comparison)."""
        driver = CoreDriver()
        driver.reply(5)
        pause(driver, "5-9")
        pause(driver, "5-10", is_pause=False)
        assert not driver.session.paused and driver.session.last_op == (5, 10)
        pause(driver, "5-9")
        assert not driver.session.paused

    def test_an_id_without_an_order_is_applied_and_orders_nothing(self) -> None:
        """An id not shaped ``<incarnation>-<seq>`` is applied whatever came before."""
        driver = CoreDriver()
        driver.reply(5)
        pause(driver, "5-3")
        pause(driver, "manual", is_pause=False)
        assert not driver.session.paused and driver.session.last_op == (5, 3)


class TestRestartedRouter:
    """A newer router incarnation's word stands, whatever its sequence numbers."""

    def test_a_newer_incarnations_pause_is_applied_despite_a_lower_sequence(self) -> None:
        """After ops up to 100-7, the restarted router's 200-1 pause is applied."""
        driver = CoreDriver()
        driver.reply(100)
        pause(driver, "100-7", is_pause=False)
        pause(driver, "200-1")
        assert driver.session.paused and driver.session.last_op == (200, 1)
        assert driver.session.router_incarnation == 200
        pause(driver, "100-8", is_pause=False)  # the dead router's, late: outdated
        assert driver.session.paused

    def test_a_newer_incarnations_reply_sets_the_state_whatever_its_op(self) -> None:
        """The restarted router's reply (state restored from an older op id, or none)
        replaces the state the worker had, and counts one restart."""
        driver = CoreDriver()
        driver.reply(100)
        pause(driver, "100-7")
        effects = driver.reply(200, paused=False, op_id="100-3")
        assert not driver.session.paused and driver.session.last_op == (100, 3)
        assert effects[0] == SessionChanged()
        assert driver.counters.snapshot()["router_restarts"] == {"seen": 1}
        pause(driver, "200-1")
        assert driver.session.paused

    def test_a_restart_resends_unanswered_requests_and_suspects_producers(self) -> None:
        """A newer incarnation sends again each request no row answered, on the
        requests channel, after the signal; a producing stream becomes a suspect at the
        core's clock, one still queued does not (the re-send covers it)."""
        driver = CoreDriver()
        driver.reply(100)  # the first router this worker knew: not a restart
        producing, queued = driver.open_stream("producing"), driver.open_stream("queued")
        done = driver.open_stream("done")
        producing.sent, queued.sent, done.sent = [b"p"], [b"q"], [b"d"]
        done.finished = True
        driver.row("producing")
        assert (producing.sent, queued.sent) == (None, [b"q"])  # a row answered it
        assert driver.reply(100) == [SessionChanged()]  # the same router again
        effects = driver.reply(101)
        assert effects == [
            SessionChanged(),
            Send("requests", [b"q"], sent=RESENT, unsent=RESEND_FAILED),
        ]
        assert producing.suspect == (driver.now.mono, "tokenizer-router")
        assert queued.suspect is None
