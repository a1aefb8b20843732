"""``switchboard drain ID --wait``: follow a drained worker until it is safe to delete.

After the drain is accepted, :func:`wait_until_safe` reads ``GET /api/workers/{id}``
every :data:`POLL_S` and prints a line whenever what it holds changes (``w1: draining,
3 in flight``), until the router reports it ``safe_to_delete`` (drained, nothing in
flight) or the wait passes. The progress lines go to stderr, so that ``--json`` output
stays one document; the final answer is the worker as it stood when the wait ended.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Final, TextIO

from switchboard.admin_cli.answers import Worker, decode
from switchboard.admin_cli.client import AdminClient
from switchboard.admin_cli.errors import OperationFailed

__all__ = ["DEFAULT_WAIT_S", "POLL_S", "progress_line", "wait_until_safe"]

#: How often the worker is read while waiting.
POLL_S: Final = 0.5
#: How long ``--wait`` waits by default: the supervisor's own drain_timeout_s default.
DEFAULT_WAIT_S: Final = 30.0


def progress_line(worker: Worker) -> str:
    """One progress line: ``w1: draining, 3 in flight`` or ``w1: drained, safe to delete``."""
    if worker.safe_to_delete:
        return f"{worker.id}: {worker.state}, safe to delete"
    inflight = "?" if worker.inflight is None else str(worker.inflight)
    return f"{worker.id}: {worker.state}, {inflight} in flight"


def wait_until_safe(
    client: AdminClient,
    worker_id: str,
    wait_s: float,
    *,
    out: TextIO = sys.stderr,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Poll the worker until it is safe to delete; its last JSON body.

    Raises :class:`OperationFailed` naming what it still holds when ``wait_s`` passes,
    and when the worker stops draining meanwhile (undrained, or gone).
    """
    path = f"/api/workers/{worker_id}"
    deadline = clock() + wait_s
    shown = ""
    while True:
        body = client.get(path)
        worker = decode(Worker, body)
        line = progress_line(worker)
        if line != shown:
            print(line, file=out, flush=True)
            shown = line
        if worker.safe_to_delete:
            return body
        if worker.state not in ("draining", "drained"):
            raise OperationFailed(f"{worker_id} is {worker.state}: it is no longer draining")
        if clock() >= deadline:
            raise OperationFailed(f"{worker_id} was not safe to delete after {wait_s:g} s ({line})")
        sleep(POLL_S)
