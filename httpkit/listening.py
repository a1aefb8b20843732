"""Taking a running server out of its port's listening group and back, dropping nothing.

A server that drains must stop receiving new connections while its siblings on the same
port take them, and end the connections it holds once their current response is out.
:class:`ListenGate` does both for a server run by :func:`httpkit.serving.serve`:

* :meth:`ListenGate.close` stops accepting. With a listening socket *shared* by every
  sibling (one socket, inherited), connections waiting in its queue stay there for the
  siblings: nothing is lost. With a socket of its own in a ``SO_REUSEPORT`` group, the
  socket is closed, which leaves the group; Linux resets the connections that were
  already queued on that socket (few: it is read all the time), so a shared socket is
  what a supervisor hands its workers.
* While closed, every response carries ``Connection: close`` (or, when its head has
  gone out already, the connection ends after it); a connection holding no request
  serves one more, or closes when idle for the keep-alive timeout, as always.
* :meth:`ListenGate.open` takes connections again: on a fresh duplicate of the shared
  socket, or on a socket bound anew with ``SO_REUSEPORT``.
* :meth:`ListenGate.leave_for_good` (the whole stack stops, so no sibling will take
  what queues): from then on closing also releases the kept socket, and the gate never
  opens again; once every process has let go, the kernel closes the listening socket
  and new clients are refused at once instead of waiting in its queue.

The gate is driven from the server's event loop thread; it does nothing until the server
has started (:meth:`attach`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Callable
from typing import Any

__all__ = ["ListenGate"]

logger = logging.getLogger(__name__)


class ListenGate:
    """Whether a server takes new connections; see the module docstring.

    ``reopen`` makes the socket to listen on again after a :meth:`close` (a duplicate of a
    shared socket, or a socket bound anew); ``shared`` says which, for messages; ``keeps``
    is the socket ``reopen`` duplicates, if any, closed by :meth:`release`.
    """

    def __init__(
        self,
        reopen: Callable[[], socket.socket],
        *,
        shared: bool,
        keeps: socket.socket | None = None,
    ) -> None:
        self._reopen = reopen
        self.shared = shared
        self._keeps = keeps
        #: True from :meth:`close` until :meth:`open`: responses end their connections.
        self.closed = False
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changing: asyncio.Task[None] | None = None
        self._wanted_closed = False
        self._for_good = False

    def release(self) -> None:
        """Close the socket this gate keeps to listen again (once the server has ended)."""
        if self._keeps is not None:
            self._keeps.close()

    def leave_for_good(self) -> None:
        """Never listen again: release the kept socket once closed (now, if it is)."""
        self._for_good = True
        if self.closed:
            self.release()

    def attach(self, server: Any) -> None:
        """Called by ``serve`` once ``server`` (a started ``uvicorn.Server``) listens."""
        self._server = server
        self._loop = asyncio.get_running_loop()
        if self._wanted_closed:
            self.set_closed(True)

    def set_closed(self, closed: bool) -> None:
        """Close (stop taking connections) or open the gate; idempotent, never blocks.

        Call from the loop's thread. The change is carried out by one task at a time, so
        a quick close-open-close ends closed.
        """
        if self._for_good and not closed:
            logger.warning("not taking connections again: the stack is stopping")
            return
        self._wanted_closed = closed
        if self._server is None or self._loop is None:
            return  # attach applies it
        if self._changing is None or self._changing.done():
            self._changing = self._loop.create_task(self._follow(), name="listen-gate")

    async def _follow(self) -> None:
        """Move to the wanted state, and again if it changed meanwhile."""
        while self.closed != self._wanted_closed:
            if self._wanted_closed:
                self._close()
            else:
                try:
                    await self._open()
                except OSError as exc:
                    # A socket of its own could not be bound again: say so and stay out.
                    logger.error("cannot listen again: %s; still not taking connections", exc)
                    return

    def _close(self) -> None:
        server = self._server
        for listener in server.servers:
            listener.close()
        server.servers = []
        self.closed = True
        if self._for_good:
            self.release()
        for connection in list(server.server_state.connections):
            # Not uvicorn's shutdown(), which also closes connections holding no request
            # yet: a client that just connected would read nothing. A busy connection ends
            # after its response; the others end after the next one, or when idle too long.
            connection.end_after_response()
        logger.info(
            "stopped taking new connections (%s)",
            "the shared socket stays with the siblings" if self.shared else "left the group",
        )

    async def _open(self) -> None:
        server = self._server
        config = server.config
        # What uvicorn's startup hands loop.create_server, made again.
        protocol = functools.partial(
            config.http_protocol_class,
            config=config,
            server_state=server.server_state,
            app_state=server.lifespan.state,
        )
        assert self._loop is not None
        listener = await self._loop.create_server(
            protocol, sock=self._reopen(), backlog=config.backlog
        )
        server.servers.append(listener)
        self.closed = False
        logger.info("taking new connections again")
