"""When a restarted role is back: a new pid, and that role's own sign of readiness.

The signs are what the supervisor itself waits for at startup (``docs/operating.md``,
section 1), read from outside: a worker ``serving`` (or ``paused``) at the router under
its new pid; the router answering ``status`` (through the admin API) under its new pid
with every worker ``serving`` (or ``paused``) again; a detokenizer, the engine or the
detokenizer router with its socket files bound (the engine also live at the router);
the admin app answering ``/healthz``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx

from switchboard.supervisor.rundir import socket_in_use
from tests.fault.harness.stack import FaultStack

__all__ = ["poll", "role_ready", "wait_restarted"]

#: A worker in either state is registered and takes requests (paused ones wait).
_ADMITTING = ("serving", "paused")


async def poll(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> float:
    """Await ``check()`` until it is true (bounded); the ``time.monotonic()`` it held."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            if await check():
                return time.monotonic()
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} ({last!r})")
        await asyncio.sleep(0.05)


async def role_ready(stack: FaultStack, admin: httpx.AsyncClient, role: str, pid: int) -> bool:
    """Whether ``role``, running as ``pid``, is ready again."""
    run_dir = stack.run_dir
    if role.startswith("worker-"):
        worker_id = role.removeprefix("worker-")
        listed = (await admin.get("/api/workers")).json()["workers"]
        return any(
            w["id"] == worker_id and w["state"] in _ADMITTING and w["pid"] == pid for w in listed
        )
    if role == "router":
        status = (await admin.get("/api/status")).json()
        serving = sum(status["workers"].get(state, 0) for state in _ADMITTING)
        return bool(
            status["router"]["pid"] == pid
            and serving == stack.config.workers
            and status["engine"]["live"]
        )
    if role == "detok-router":
        names = ("detok-router-in", "detok-router-control")
        return all(socket_in_use(run_dir / name) for name in names)
    if role.startswith("detokenizer-"):
        return socket_in_use(run_dir / role)
    if role == "engine":
        ready = (await admin.get("/readyz")).status_code == 200
        return ready and socket_in_use(run_dir / "engine")
    if role == "admin":
        return (await admin.get("/healthz")).status_code == 200
    raise ValueError(f"unknown role {role!r}")


async def wait_restarted(
    stack: FaultStack, admin: httpx.AsyncClient, role: str, old_pid: int, timeout: float
) -> tuple[int, float]:
    """Wait until ``role`` runs under a pid other than ``old_pid`` and is ready; return the
    new pid and the ``time.monotonic()`` it was ready."""
    found: dict[str, int] = {}

    async def restarted() -> bool:
        found.update(stack.roles())
        return found.get(role, old_pid) != old_pid

    await poll(restarted, timeout, f"{role} restarted (was pid {old_pid})")
    new_pid = found[role]

    async def ready() -> bool:
        return await role_ready(stack, admin, role, new_pid)

    ready_at = await poll(ready, timeout, f"{role} (pid {new_pid}) ready")
    return new_pid, ready_at
