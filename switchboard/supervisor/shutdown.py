"""Stopping the stack: drain the workers through the router, then stop children in order."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Sequence

from router_core.control import ControlError
from router_core.control.command_args import WorkerArgs
from router_core.control.commands import DRAIN
from router_core.control.replies import WorkerView
from switchboard.supervisor.children import Child, describe_exit
from switchboard.supervisor.readiness import Probes

__all__ = ["drain_workers", "stop_children"]

log = logging.getLogger("switchboard.supervisor")

_POLL_INTERVAL_S = 0.05
#: A router busy with a burst of traffic may be slow to answer; a drain is worth a wait.
_CONTROL_TIMEOUT_S = 2.0
#: How long to wait for the kernel to reap a child after SIGKILL.
_KILL_WAIT_S = 5.0


def _undrained(workers: Sequence[Child], registry: dict[str, WorkerView]) -> dict[str, int]:
    """In-flight counts of running workers the registry does not yet show drained and empty."""
    left: dict[str, int] = {}
    for child in workers:
        record = registry.get(child.spec.worker_id or "")
        if record is None or not child.alive():
            continue  # gone from the registry or dead: nothing left to wait for
        if record.state != "drained" or record.inflight != 0:
            left[child.name] = record.inflight
    return left


def drain_workers(
    probes: Probes,
    workers: Sequence[Child],
    router: Child,
    timeout_s: float,
    hurry: Callable[[], bool],
) -> bool:
    """Drain every running worker and wait until each reports ``drained`` with nothing in flight.

    Each worker is sent ``drain`` through ``router``, after which it answers new
    requests 503 while its in-flight requests finish. Returns True when all drained;
    False when ``timeout_s`` passed, ``hurry()`` turned true (a second signal) or the
    router is not running. Failures are logged, never raised: stopping goes on.
    """
    if not router.alive():
        log.warning("the router is not running; stopping without a drain")
        return False
    for child in workers:
        if child.spec.worker_id is None or not child.alive():
            continue
        try:
            probes.request(
                probes.router_control,
                DRAIN,
                WorkerArgs(worker_id=child.spec.worker_id),
                timeout_s=_CONTROL_TIMEOUT_S,
            )
        except ControlError as exc:
            log.warning("cannot drain %s: %s", child.name, exc)
    log.info("draining %d worker(s), up to %.1f s; signal again to skip", len(workers), timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            left: dict[str, int] | None = _undrained(workers, probes.workers(_CONTROL_TIMEOUT_S))
        except ControlError as exc:
            if not router.alive():
                log.warning("the router exited; stopping without the rest of the drain")
                return False
            log.debug("no registry from the router yet (%s)", exc)
            left = None  # a slow answer: ask again until the deadline
        if left is not None and not left:
            log.info("every worker is drained")
            return True
        pending = ", ".join(f"{name} ({count} in flight)" for name, count in (left or {}).items())
        if hurry():
            log.warning("second signal: stopping without waiting for the drain: %s", pending)
            return False
        if time.monotonic() >= deadline:
            log.warning("drain timed out after %.1f s: %s", timeout_s, pending or "no answer")
            return False
        time.sleep(_POLL_INTERVAL_S)


def _wait_exit(children: Sequence[Child], deadline: float, hurry: Callable[[], bool]) -> None:
    while any(child.alive() for child in children):
        if time.monotonic() >= deadline or hurry():
            return
        time.sleep(_POLL_INTERVAL_S)


def stop_children(children: Sequence[Child], timeout_s: float, hurry: Callable[[], bool]) -> None:
    """SIGTERM every running child, SIGKILL those still running after ``timeout_s``.

    ``hurry()`` turning true skips the rest of the wait. Every child is reaped before
    this returns (or, for one SIGKILL cannot end, logged).
    """
    running = [child for child in children if child.alive()]
    for child in running:
        child.send(signal.SIGTERM)
    _wait_exit(running, time.monotonic() + timeout_s, hurry)
    stubborn = [child for child in running if child.alive()]
    for child in stubborn:
        log.warning(
            "%s (pid %s) still running after SIGTERM; sending SIGKILL", child.name, child.pid
        )
        child.send(signal.SIGKILL)
    _wait_exit(stubborn, time.monotonic() + _KILL_WAIT_S, lambda: False)
    for child in children:
        child.sweep()  # also of one that exited before the stop: its leftovers
    for child in running:
        code = child.poll()
        if code is None:
            log.error("%s (pid %s) did not exit even after SIGKILL", child.name, child.pid)
        elif code == 0:
            log.info("stopped %s (pid %s)", child.name, child.pid)
        else:
            log.warning("stopped %s (pid %s): %s", child.name, child.pid, describe_exit(code))
