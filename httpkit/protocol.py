"""uvicorn's httptools protocol, holding its clients to :class:`~httpkit.limits.HttpLimits`.

:func:`limited_protocol` makes the protocol class to hand ``uvicorn.Config(http=...)``.
The parser stays httptools (C); what this adds per request is a few comparisons and, only
for a head or body that does not arrive in one read, one timer:

* the bytes of a request head are counted as they arrive, *before* the parser sees
  them: past ``max_header_bytes`` the request is answered 431 and no more of it is parsed
  (uvicorn and httptools concatenate partial URL and header pieces, so an unbounded head
  costs memory and, quadratically, time);
* a head that is still incomplete after a read arms a deadline ``header_timeout_s`` from
  its first byte; a body still incomplete after the head arms one ``body_timeout_s``
  from the head's end. Either passing is 408. While the server itself has paused reading
  (a pipelined request waiting its turn, a body the app has not read yet), a deadline
  passing is not the client's doing and starts again;
* every connection, a fresh one included, is closed after ``keep_alive_s`` without a
  request in progress (uvicorn arms this timer only after a response);
* a connection beyond ``max_connections`` is answered 503 as soon as it is accepted.

A refusal writes its answer (``Connection: close``), half-closes the connection and
reads on for up to :data:`LINGER_S`, dropping what arrives, so that a client still
sending gets to read the answer instead of a reset. The app never answers a refused
request: a body it was reading ends as a disconnect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar, Final

import httptools
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from httpkit.limits import HttpLimits, Refusals
from httpkit.listening import ListenGate

__all__ = ["LINGER_S", "LimitedHttpToolsProtocol", "limited_protocol"]

#: Seconds a refused connection is read on (and its data dropped) before it is closed.
LINGER_S: Final = 2.0


class _Refused(Exception):
    """Raised in a parser callback to stop parsing a request that was just refused."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol under :attr:`limits`, refusing as :attr:`refusals`
    say (see the module docstring). Use :func:`limited_protocol` to set both."""

    limits: ClassVar[HttpLimits] = HttpLimits()
    refusals: ClassVar[Refusals] = Refusals()
    #: The server's listen gate: while it is closed, every response ends its connection.
    gate: ClassVar[ListenGate | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = self.limits.keep_alive_s  # type: ignore[assignment]
        self._reading_head = True
        self._reading_body = False
        #: Bytes received since the current head's first read (whole reads, so a body
        #: read together with its head counts too; see on_headers_complete).
        self._head_bytes = 0
        #: The head's or the body's deadline, or the end of a refused connection's linger.
        self._deadline: asyncio.TimerHandle | None = None
        self._refused = False

    # Connection events

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            # Not counted while it lingers: it holds no request and closes by itself.
            self.connections.discard(self)
            message = (
                f"this server holds {self.limits.max_connections} connections, its most "
                "(max_connections); retry later"
            )
            self._refuse(503, "too_many_connections", message, (b"retry-after", b"1"))
            return
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: what a refused client still sends is dropped
        self._unset_keepalive_if_required()
        if self._reading_head:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if not self._refused:  # else a callback stopped the parser on purpose
                message = "Invalid HTTP request received."
                self.logger.warning(message)
                self.send_400_response(message)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._reading_head:
            if not self._head_bytes:
                pass  # the usual case: the request arrived whole, nothing of the next yet
            elif self._head_bytes > self.limits.max_header_bytes:
                self._refuse_large_head()
            elif self._deadline is None:
                self._deadline = self.loop.call_later(
                    self.limits.header_timeout_s, self._head_timed_out
                )
        elif self._reading_body and self._deadline is None:
            self._deadline = self.loop.call_later(self.limits.body_timeout_s, self._body_timed_out)

    # Parser callbacks

    def on_headers_complete(self) -> None:
        if self._head_bytes > self.limits.max_header_bytes and (
            self._head_size() > self.limits.max_header_bytes
        ):
            self._refuse_large_head()
            raise _Refused
        self._reading_head = False
        self._reading_body = True
        if self._deadline is not None:
            self._cancel_deadline()
        super().on_headers_complete()
        if self.gate is not None and self.gate.closed and self.cycle is not None:
            # Leaving the listening group: this connection's last response.
            self.cycle.keep_alive = False

    def on_message_complete(self) -> None:
        self._reading_body = False
        self._reading_head = True
        self._head_bytes = 0
        if self._deadline is not None:
            self._cancel_deadline()
        super().on_message_complete()

    def end_after_response(self) -> None:
        """Make the response in progress, if any, this connection's last (the server is
        leaving its listening group; a connection holding no request ends after its
        next response, by the gate's check in :meth:`on_headers_complete`)."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False

    # Limits

    def _head_size(self) -> int:
        """The current head's size, from what the parser has handed over (the request
        line's method and version, a few bytes, are left out)."""
        return len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)

    def _refuse_large_head(self) -> None:
        limit = self.limits.max_header_bytes
        message = f"the request head exceeds {limit} bytes (max_header_bytes)"
        self._refuse(431, "header_too_large", message)

    def _head_timed_out(self) -> None:
        seconds = self.limits.header_timeout_s
        self._timed_out("header_timeout", "head", seconds, self._head_timed_out)

    def _body_timed_out(self) -> None:
        self._timed_out("body_timeout", "body", self.limits.body_timeout_s, self._body_timed_out)

    def _timed_out(self, reason: str, part: str, seconds: float, again: Callable[[], None]) -> None:
        """A deadline passed: 408, unless the server itself paused reading meanwhile."""
        if self.flow.read_paused:
            self._deadline = self.loop.call_later(seconds, again)
            return
        self._deadline = None
        message = f"the request {part} did not arrive within {seconds:g} s ({reason}_s)"
        self._refuse(408, reason, message)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _may_answer(self) -> bool:
        """Whether a refusal may be written now: no response is under way on the
        connection (a pipelined one in flight, or the app's answer to this request)."""
        if self.pipeline:
            return False
        cycle: RequestResponseCycle | None = self.cycle  # None before the first request
        if cycle is None:
            return True
        if self._reading_head:
            return cycle.response_complete
        return not cycle.response_started

    def _refuse(self, status: int, reason: str, message: str, *extra: tuple[bytes, bytes]) -> None:
        """Answer ``status`` (if nothing else is being answered), then linger and close."""
        self._refused = True
        self._cancel_deadline()
        self._unset_keepalive_if_required()
        self.refusals.counted(reason)
        if not self._may_answer():
            self.transport.close()
            return
        cycle: RequestResponseCycle | None = self.cycle
        if cycle is not None and not cycle.response_complete:
            # The app reading this request's body sees a disconnect and answers nothing.
            cycle.disconnected = True
            cycle.message_event.set()
        body = self.refusals.body(status, reason, message)
        self.transport.write(self._answer(status, body, extra))
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._deadline = self.loop.call_later(LINGER_S, self.transport.close)

    def _answer(self, status: int, body: bytes, extra: tuple[tuple[bytes, bytes], ...]) -> bytes:
        parts = [STATUS_LINE[status]]
        for name, value in (*self.server_state.default_headers, *extra):
            parts += [name, b": ", value, b"\r\n"]
        parts += [
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
            body,
        ]
        return b"".join(parts)


def limited_protocol(
    limits: HttpLimits, refusals: Refusals | None = None, gate: ListenGate | None = None
) -> type[HttpToolsProtocol]:
    """A :class:`LimitedHttpToolsProtocol` subclass under ``limits`` (and ``gate``, if
    given), for ``uvicorn.Config(http=...)``."""
    attributes = {"limits": limits, "refusals": refusals or Refusals(), "gate": gate}
    return type("LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), attributes)
