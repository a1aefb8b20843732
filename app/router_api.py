"""The admin app's one way to the router: an :class:`AsyncControlClient` behind typed calls.

:meth:`RouterApi.call` runs any command of :mod:`router_core.control.commands` (the
mutations' routes call it with the command and its struct); the reads the API composes
(workers, status, load) have their own method. Each call the client decodes its
reply as that command's struct (:mod:`router_core.control.replies`) and :mod:`app.views`
turns the struct into the API's model. Every control failure, a reply of another shape
included, is translated here, once, into an :class:`ApiException`
(:func:`app.errors.from_control_error`); route handlers and the poller never see a
control error. A mutation names the operator who asked (``by``, a token's name): the
router's audit line then says ``admin:<name>``; reads, and a mutation without ``by``, go
as the client's own actor (``admin``).
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from app.errors import from_control_error
from app.models import Load, Status, Worker
from app.task_groups import both
from app.views import load_of, status_of, worker_of, workers_of
from router_core.control import AsyncControlClient, ControlCommand, ControlError
from router_core.control.command_args import ListWorkersArgs, WorkerArgs
from router_core.control.commands import GET_WORKER, LIST_WORKERS, LOAD, STATUS
from router_core.control.replies import RouterStatus

__all__ = ["RouterApi"]

Args = TypeVar("Args", bound=msgspec.Struct)
Reply = TypeVar("Reply")


class RouterApi:
    """Typed control commands over one shared client (any number of concurrent calls).

    ``timeout_s`` bounds reads and drains; a barrier waits ``timeout_s`` more than its own
    timeout (the client adds a margin).
    """

    def __init__(self, client: AsyncControlClient, *, admin_version: str, timeout_s: float) -> None:
        self.client = client
        self.admin_version = admin_version
        self.timeout_s = timeout_s

    async def call(
        self, command: ControlCommand[Args, Reply], args: Args | None = None, *, by: str = ""
    ) -> Reply:
        """``command``'s typed reply; ApiException if it fails or the router is silent.
        ``by``: the operator asking, sent as the actor ``admin:<by>``."""
        actor = f"admin:{by}" if by else None
        try:
            return await self.client.request(
                command, args, reply_timeout_s=self.timeout_s, actor=actor
            )
        except ControlError as exc:
            raise from_control_error(exc) from exc

    async def workers(self) -> list[Worker]:
        """Every worker, recently departed ones as ``dead``."""
        views = await self.call(LIST_WORKERS, ListWorkersArgs(include_departed=True))
        return workers_of(views)

    async def worker(self, worker_id: str) -> Worker:
        """One worker; 404 for an id the router never saw (or forgot)."""
        return worker_of(await self.call(GET_WORKER, WorkerArgs(worker_id=worker_id)))

    async def load(self) -> Load | None:
        return load_of(await self.call(LOAD))

    async def status(self) -> Status:
        """The router's status with the engine's load."""
        status, load = await both(self.call(STATUS), self.call(LOAD))
        return status_of(status, load, self.admin_version)

    async def answers(self, timeout_s: float) -> RouterStatus | None:
        """The router's status if it answers within ``timeout_s``, else None."""
        try:
            return await self.client.request(STATUS, reply_timeout_s=timeout_s)
        except ControlError:
            return None
