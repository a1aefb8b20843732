"""The admin app's one way to the router: an :class:`AsyncControlClient` behind typed calls.

Every control failure is translated here, once, into an :class:`ApiException`
(:func:`app.errors.from_control_error`); route handlers and the poller never see a
control error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from app.errors import from_control_error
from app.models import FreezeGcResult, Load, Operation, Status, Worker
from app.views import load_of, operation_of, status_of, worker_of, workers_of
from router_core.control import AsyncControlClient, ControlError

__all__ = ["RouterApi"]


class RouterApi:
    """Typed control commands over one shared client (any number of concurrent calls).

    ``timeout_s`` bounds reads and drains; a barrier waits ``timeout_s`` more than its own
    timeout (the client adds a margin).
    """

    def __init__(self, client: AsyncControlClient, *, admin_version: str, timeout_s: float) -> None:
        self.client = client
        self.admin_version = admin_version
        self.timeout_s = timeout_s

    async def call(self, command: str, /, **args: Any) -> Any:
        """``command`` as plain data; ApiException if it fails or the router is silent."""
        try:
            result = await self.client.call(command, reply_timeout_s=self.timeout_s, **args)
        except ControlError as exc:
            raise from_control_error(exc) from exc
        return msgspec.to_builtins(result)

    async def workers(self) -> list[Worker]:
        """Every worker, recently departed ones as ``dead``."""
        return workers_of(await self.call("list_workers", include_departed=True))

    async def worker(self, worker_id: str) -> Worker:
        """One worker; 404 for an id the router never saw (or forgot)."""
        return worker_of(await self.call("get_worker", worker_id=worker_id))

    async def load(self) -> Load | None:
        return load_of(await self.call("load"))

    async def status(self) -> Status:
        """The router's status with the engine's load."""
        status, load = await asyncio.gather(self.call("status"), self.call("load"))
        return status_of(status, load, self.admin_version)

    async def barrier(self, action: str, **args: Any) -> Operation:
        """``pause`` or ``continue``: the operation, complete or not."""
        return operation_of(await self.call(action, **args))

    async def drain(self, worker_id: str, *, drain: bool) -> Worker:
        return worker_of(await self.call("drain" if drain else "undrain", worker_id=worker_id))

    async def freeze_gc(self) -> FreezeGcResult:
        reply = await self.call("freeze_gc")
        return FreezeGcResult(
            frozen=list(reply["frozen"]), forwarded_to=list(reply["forwarded_to"])
        )

    async def answers(self, timeout_s: float) -> dict[str, Any] | None:
        """The router's status if it answers within ``timeout_s``, else None."""
        try:
            result = await self.client.call("status", reply_timeout_s=timeout_s)
        except ControlError:
            return None
        status: dict[str, Any] = msgspec.to_builtins(result)
        return status
