"""Clients of a control socket, sync and async: the one seam between HTTP and zmq.

Both speak through a DEALER socket and match replies to requests by id, so a reply that
arrives after its caller gave up is recognised and dropped rather than handed to the
next caller. Both send the stack key (``key``) and who is asking (``actor``) with every
request: a router with a key refuses every request without it (``UNAUTHORIZED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import msgspec
import zmq
import zmq.asyncio

from router_core.control.command_model import ControlCommand
from router_core.control.protocol import (
    ControlError,
    ControlReply,
    ControlRequest,
    ControlTimeout,
    ErrorCode,
    decode_reply,
    encode,
)
from router_core.curve import ClientKeys, read_public_key
from router_core.curve_files import read_key_pair
from router_core.zap import curve_client

__all__ = ["AsyncControlClient", "ControlClient", "control_client_keys"]

ArgsT = TypeVar("ArgsT", bound=msgspec.Struct)
ReplyT = TypeVar("ReplyT")


#: How much longer than a command's own ``timeout_s`` a client waits for its reply: the
#: router answers a barrier at its deadline, so this covers only the trip back.
_REPLY_MARGIN_S = 1.0


def _reply_timeout(default: float, explicit: float | None, args: dict[str, Any]) -> float:
    """How long to wait for a reply: a command with its own ``timeout_s`` (a barrier) is
    answered by then, so the caller waits that and the margin, no longer, whatever the
    client's default (a router that died with the command must not hold its caller to a
    longer read timeout); any other command waits ``explicit`` or the default."""
    inner = args.get("timeout_s")
    if isinstance(inner, int | float) and not isinstance(inner, bool) and inner > 0:
        return float(inner) + _REPLY_MARGIN_S
    # No timeout of its own, or one the router will refuse at once (BAD_ARGUMENTS).
    return default if explicit is None else explicit


@dataclass(frozen=True)
class _Caller:
    """What every request of one client carries besides its command: key and actor."""

    key: str
    actor: str

    def request(
        self, request_id: int, command: str, args: dict[str, Any], limit_s: float
    ) -> ControlRequest:
        deadline_ns = time.time_ns() + int(limit_s * 1e9)
        return ControlRequest(
            id=request_id,
            command=command,
            args=args,
            deadline_ns=deadline_ns,
            key=self.key,
            actor=self.actor,
        )


def _result_of(reply: ControlReply) -> Any:
    if reply.ok:
        return reply.result
    body = reply.error
    if body is None:
        raise ControlError(ErrorCode.INTERNAL, "error reply without a body")
    try:
        code = ErrorCode(body.code)
    except ValueError:
        code = ErrorCode.INTERNAL
    raise ControlError(code, body.message)


def _arguments(args: msgspec.Struct | None) -> dict[str, Any]:
    """A command's argument struct as the request's ``args`` map."""
    if args is None:
        return {}
    encoded: dict[str, Any] = msgspec.to_builtins(args)
    return encoded


def _typed(command: ControlCommand[Any, ReplyT], result: Any) -> ReplyT:
    """``result`` as the command's reply type; ``ControlError`` if it is not one."""
    try:
        reply: ReplyT = msgspec.convert(result, command.reply_type)
    except msgspec.ValidationError as exc:
        raise ControlError(
            ErrorCode.INTERNAL, f"{command.name}: unexpected reply shape: {exc}"
        ) from exc
    return reply


def _configure(sock: zmq.Socket[Any], curve: ClientKeys | None) -> None:
    # ZMQ_IMMEDIATE: requests queue only on a live connection, so while the server is
    # down nothing piles up (to be run stale when it returns, or to fill the queue until
    # every send blocks); a send finds no peer and the caller's deadline decides.
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IMMEDIATE, 1)
    if curve is not None:
        curve_client(sock, curve)


def control_client_keys(pair: Path | None, server_public: Path | None) -> ClientKeys | None:
    """The CURVE keys in a client's ``.secret`` file and the router's ``.public`` file
    (None when both are None); :class:`~router_core.credentials.KeyFileError` naming a
    file that cannot be used, ``ValueError`` for only one of them."""
    if pair is None and server_public is None:
        return None
    if pair is None or server_public is None:
        raise ValueError("CURVE needs both the client's key pair and the router's public key")
    return ClientKeys(read_key_pair(pair), read_public_key(server_public))


def _checked_curve(endpoint: str, curve: ClientKeys | None) -> ClientKeys | None:
    """``curve``, required for a ``tcp://`` endpoint (``ValueError`` without): a router
    refuses a tcp control socket without CURVE, so a client without keys would only
    time out."""
    if curve is None and endpoint.startswith("tcp://"):
        raise ValueError(
            f"the control endpoint {endpoint} is tcp://, where the router requires CURVE: "
            "give a client key pair and the router's public key"
        )
    return curve


class ControlClient:
    """Blocking client; one call at a time (not thread-safe, like a zmq socket).

    ``request`` raises :class:`ControlError` for an error reply and :class:`ControlTimeout`
    when the server does not answer within ``timeout_s``. Requests carry their deadline,
    so a server that reads one too late drops it; after a timeout the socket is replaced
    too, so the request is not even delivered. Each carries ``key`` (None: none) and
    ``actor``.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_s: float = 10.0,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        key: str | None = None,
        actor: str = "",
        curve: ClientKeys | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._curve = _checked_curve(endpoint, curve)
        self._caller = _Caller(key or "", actor)
        self._context = context or zmq.Context.instance()
        self._ids = itertools.count(1)
        self._socket: zmq.Socket[bytes] | None = None

    def _connected(self) -> zmq.Socket[bytes]:
        if self._socket is None:
            sock = self._context.socket(zmq.DEALER)
            _configure(sock, self._curve)
            sock.connect(self.endpoint)
            self._socket = sock
        return self._socket

    def _call(self, command: str, /, *, reply_timeout_s: float | None = None, **args: Any) -> Any:
        """Run ``command`` with ``args`` and return its result as plain data.

        The reply is awaited for ``reply_timeout_s`` (default: the client's
        ``timeout_s``), and always a little longer than a ``timeout_s`` argument that
        the command itself waits for (a pause barrier).
        """
        sock = self._connected()
        request_id = next(self._ids)
        limit = _reply_timeout(self.timeout_s, reply_timeout_s, args)
        deadline = time.monotonic() + limit
        request = encode(self._caller.request(request_id, command, args, limit))
        while True:
            try:
                sock.send(request, zmq.NOBLOCK)
                break
            except zmq.Again:
                # No connection to the server (yet): wait for one, within the deadline.
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0 or not sock.poll(remaining_ms, zmq.POLLOUT):
                    self.close()
                    raise ControlTimeout(f"{command}: {self.endpoint} is not reachable") from None
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0 or not sock.poll(remaining_ms, zmq.POLLIN):
                # A fresh socket next time: the request may still sit in this one's
                # queue, and a server that comes up later must not run it.
                self.close()
                raise ControlTimeout(f"{command}: no reply from {self.endpoint}")
            try:
                reply = decode_reply(sock.recv())
            except msgspec.DecodeError:
                continue
            if reply.id == request_id:
                return _result_of(reply)

    def request(
        self,
        command: ControlCommand[ArgsT, ReplyT],
        args: ArgsT | None = None,
        *,
        reply_timeout_s: float | None = None,
    ) -> ReplyT:
        """Run ``command`` (default arguments when ``args`` is None) and return its reply
        as the command's reply type; a reply of another shape is ``ControlError``
        (``INTERNAL``)."""
        result = self._call(command.name, reply_timeout_s=reply_timeout_s, **_arguments(args))
        return _typed(command, result)

    def close(self) -> None:
        """Close the socket; the client may be used again (it reconnects)."""
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncControlClient:
    """Asyncio client; any number of concurrent calls share one socket.

    Use as ``async with AsyncControlClient(endpoint) as client``; a background task
    hands each reply to the call waiting for its id. A request the server reads after
    its caller gave up is dropped there (it carries its deadline). Each carries ``key``
    and ``actor``, as for :class:`ControlClient`; a call may name its own ``actor``.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_s: float = 10.0,
        context: zmq.asyncio.Context | None = None,
        key: str | None = None,
        actor: str = "",
        curve: ClientKeys | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._curve = _checked_curve(endpoint, curve)
        self._caller = _Caller(key or "", actor)
        self._context = context or zmq.asyncio.Context.instance()
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[ControlReply]] = {}
        self._socket: zmq.asyncio.Socket | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect and start reading replies."""
        if self._socket is None:
            sock = self._context.socket(zmq.DEALER)
            _configure(sock, self._curve)
            sock.connect(self.endpoint)
            self._socket = sock
            self._reader = asyncio.create_task(self._read_replies())

    async def _call(
        self,
        command: str,
        /,
        *,
        reply_timeout_s: float | None = None,
        actor: str | None = None,
        **args: Any,
    ) -> Any:
        """Run ``command`` with ``args`` and return its result as plain data (see
        ``ControlClient._call``); ``actor`` instead of the client's, if given."""
        if self._socket is None:
            await self.start()
        assert self._socket is not None
        request_id = next(self._ids)
        future: asyncio.Future[ControlReply] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        limit = _reply_timeout(self.timeout_s, reply_timeout_s, args)
        try:
            async with asyncio.timeout(limit):
                caller = self._caller if actor is None else _Caller(self._caller.key, actor)
                await self._send(encode(caller.request(request_id, command, args, limit)))
                reply = await future
        except TimeoutError as exc:
            raise ControlTimeout(f"{command}: no reply from {self.endpoint}") from exc
        finally:
            self._waiting.pop(request_id, None)
        return _result_of(reply)

    async def request(
        self,
        command: ControlCommand[ArgsT, ReplyT],
        args: ArgsT | None = None,
        *,
        reply_timeout_s: float | None = None,
        actor: str | None = None,
    ) -> ReplyT:
        """The typed call (see ``ControlClient.request``); ``actor`` instead of the
        client's, if given."""
        result = await self._call(
            command.name, reply_timeout_s=reply_timeout_s, actor=actor, **_arguments(args)
        )
        return _typed(command, result)

    async def _send(self, request: bytes) -> None:
        """Send without queueing for a server that is not connected: wait for it instead
        (the caller's deadline bounds the wait)."""
        assert self._socket is not None
        while True:
            try:
                await self._socket.send(request, zmq.NOBLOCK)
                return
            except zmq.Again:
                await self._socket.poll(None, zmq.POLLOUT)  # type: ignore[call-arg]  # the stub lacks flags

    async def _read_replies(self) -> None:
        assert self._socket is not None
        while True:
            frame = await self._socket.recv()
            try:
                reply = decode_reply(frame)
            except msgspec.DecodeError:
                continue
            future = self._waiting.get(reply.id)
            if future is not None and not future.done():
                future.set_result(reply)

    async def close(self) -> None:
        """Stop reading and close the socket; pending calls fail with a timeout."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
