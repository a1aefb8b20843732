"""Simulated workers for ``switchboard bench workers``: many real worker links in one process.

A simulated worker is a real :class:`~router_core.worker_link.WorkerLink`, the same object
an HTTP worker serves through, with its own return address, sockets, registration timer
and session: it registers with the stack key, heartbeats at the interval the router names,
and answers every pause broadcast by the code a real worker answers it with. Only the
HTTP server in front of it is missing. One process holds ``len(worker_ids)`` of them on
one asyncio loop, so a thousand workers take a handful of processes instead of a
thousand.

:func:`run_links` is a :class:`~switchboard.bench.procs.ProcessGroup` target. It
reports ``("ready", {"links": n, "pid": pid})`` once every link is registered (or
``("error", ...)`` if they are not within ``register_timeout_s``), then keeps the
links open until SIGTERM, when it closes them (each deregisters, as a worker stopping
cleanly does) and reports ``("closed", summary)`` (:func:`_summary`).
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from router_core.credentials import KEY_FILE, read_key
from router_core.endpoints import RouterEndpoints, worker_address
from router_core.worker_link import WorkerLink
from router_core.worker_link.session import WorkerIdentity
from router_core.worker_link.settings import WorkerLinkSettings
from switchboard import __version__
from switchboard.bench.procs import Report

__all__ = ["raise_open_file_limit", "run_links", "worker_ids"]

#: How often the child looks whether every link is registered while it waits.
_READY_POLL_S: Final = 0.05


def worker_ids(count: int, processes: int) -> list[list[str]]:
    """``count`` ids (``sim-00000`` ...) dealt round robin over ``processes`` lists.

    Ids are zero-padded to at least five digits so that they sort in number order in
    the router's views; more digits are used when ``count`` needs them (no cap).
    """
    if count < 1 or processes < 1:
        raise ValueError("count and processes must be at least 1")
    width = max(5, len(str(count - 1)))
    names = [f"sim-{index:0{width}d}" for index in range(count)]
    return [names[start::processes] for start in range(min(processes, count))]


def raise_open_file_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; the new limit.

    Each link holds about ten descriptors (three sockets, their context's threads'
    mailboxes and epoll), so a few hundred links need more than the common default
    of 1024.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def _link(run_dir: Path, worker_id: str, key: str, host: str) -> WorkerLink:
    """One worker's link in ``run_dir``'s layout, as an HTTP worker there makes it."""
    router = RouterEndpoints.in_run_dir(run_dir)
    address = worker_address(run_dir, worker_id)
    settings = WorkerLinkSettings(
        address=address,
        requests_endpoint=router.requests,
        workers_endpoint=router.workers,
        key=key,
    )
    identity = WorkerIdentity(
        worker_id,
        address,
        pid=os.getpid(),
        host=host,
        version=__version__,
        started_ns=time.time_ns(),
    )
    return WorkerLink(settings, identity)


async def _hold(
    report: Report, run_dir: Path, ids: Sequence[str], register_timeout_s: float
) -> None:
    key = read_key(run_dir / KEY_FILE)
    host = socket.gethostname()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    links = [_link(run_dir, worker_id, key, host) for worker_id in ids]
    opened: list[WorkerLink] = []
    try:
        for link in links:
            await link.open()
            opened.append(link)
        deadline = time.monotonic() + register_timeout_s
        while not all(link.session.registered for link in opened):
            if time.monotonic() > deadline or stop.is_set():
                waiting = sum(not link.session.registered for link in opened)
                report.send(("error", f"{waiting} of {len(opened)} links not registered"))
                return
            await asyncio.sleep(_READY_POLL_S)
        report.send(("ready", {"links": len(opened), "pid": os.getpid()}))
        await stop.wait()
    finally:
        # From here SIGTERM ends the process at once (the loop that caught it closes).
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        summary = _summary(opened)
        # Deregister and close every link together: a worker stopping cleanly.
        await asyncio.gather(*(link.close() for link in opened), return_exceptions=True)
    report.send(("closed", summary))


def _summary(links: Sequence[WorkerLink]) -> dict[str, Any]:
    """How many of ``links`` are registered and paused, and the last pause or continue
    operation each applied, as ``"incarnation-seq"`` -> links."""
    applied: dict[str, int] = {}
    for link in links:
        last = link.session.last_op
        name = "" if last is None else f"{last[0]}-{last[1]}"
        applied[name] = applied.get(name, 0) + 1
    return {
        "links": len(links),
        "registered": sum(link.session.registered for link in links),
        "paused": sum(link.session.paused for link in links),
        "last_op": applied,
    }


def run_links(report: Report, run_dir: str, ids: Sequence[str], register_timeout_s: float) -> None:
    """Child body: open a real worker link per id in ``ids`` against the router of
    ``run_dir`` and hold them until SIGTERM (see the module docstring)."""
    raise_open_file_limit()
    asyncio.run(_hold(report, Path(run_dir), ids, register_timeout_s))
