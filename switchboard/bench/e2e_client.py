"""Streaming ``/generate`` clients of the end-to-end benchmark, one request at a time each.

Two transports behind one seam (:class:`StreamClient`): ``raw``, a minimal HTTP/1.1
client on asyncio streams (one keep-alive connection per client, chunked transfer decoded
by hand, only the final event parsed), and ``httpx``, one shared ``httpx.AsyncClient``
with a keep-alive pool sized to the number of clients. The load generator shares two
cores with the stack, so the leaner ``raw`` one is the default; ``httpx`` is kept to
measure that choice against (see docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final, Literal, Protocol

import msgspec

from switchboard.bench.e2e_stats import RequestRecord

__all__ = [
    "CLIENT_KINDS",
    "ClientKind",
    "StreamClient",
    "StreamError",
    "final_event_tokens",
    "generate_body",
    "open_clients",
]

ClientKind = Literal["raw", "httpx"]
CLIENT_KINDS: Final[tuple[ClientKind, ...]] = ("raw", "httpx")

_DONE: Final = b"data: [DONE]"
_HEAD_END: Final = b"\r\n\r\n"
_CRLF: Final = b"\r\n"


class StreamError(Exception):
    """A stream that did not end as a complete, successful generation."""


class _Meta(msgspec.Struct):
    completion_tokens: int
    finish_reason: Any = None


class _Event(msgspec.Struct):
    meta_info: _Meta | None = None
    error: Any = None


_EVENT_DECODER: Final = msgspec.json.Decoder(_Event)


class StreamClient(Protocol):
    """Sends one streaming request at a time and reports how it went."""

    async def generate(self) -> RequestRecord:
        """Stream one request to its end; failures are reported in the record, not raised."""
        ...


def generate_body(prompt: str, max_new_tokens: int) -> bytes:
    """The JSON body of a streaming ``/generate`` request."""
    return msgspec.json.encode(
        {"text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens}, "stream": True}
    )


def final_event_tokens(body: bytes) -> int:
    """``completion_tokens`` of a finished SSE stream's last event before ``[DONE]``.

    Raises :class:`StreamError` if the stream does not end with ``data: [DONE]``, its last
    event carries an error, or it has no finish reason.
    """
    parts = body.rstrip().rsplit(b"\n\n", 2)
    if len(parts) < 2 or parts[-1].strip() != _DONE:
        raise StreamError("the stream did not end with data: [DONE]")
    last = parts[-2].strip()
    if not last.startswith(b"data:"):
        raise StreamError("no event before [DONE]")
    try:
        event = _EVENT_DECODER.decode(last[5:])
    except msgspec.DecodeError as exc:
        raise StreamError(f"undecodable final event: {exc}") from exc
    if event.error is not None:
        raise StreamError(f"error event: {event.error}")
    if event.meta_info is None or event.meta_info.finish_reason is None:
        raise StreamError("the final event has no finish reason")
    return event.meta_info.completion_tokens


def _failed(started: float, first: float | None, exc: BaseException) -> RequestRecord:
    return RequestRecord(started, first, time.perf_counter(), 0, f"{type(exc).__name__}: {exc}")


class _RawClient:
    """One HTTP/1.1 keep-alive connection, reopened after a failure or ``Connection: close``."""

    def __init__(self, host: str, port: int, body: bytes, timeout_s: float) -> None:
        self._host = host
        self._port = port
        self._timeout_s = timeout_s
        head = (
            f"POST /generate HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self._request = head.encode("ascii") + body
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def generate(self) -> RequestRecord:
        started = time.perf_counter()
        first: float | None = None
        chunks: list[bytes] = []
        try:
            async with asyncio.timeout(self._timeout_s):
                if self._streams is None:
                    self._streams = await asyncio.open_connection(self._host, self._port)
                reader, writer = self._streams
                writer.write(self._request)
                status, headers = _parse_head(await reader.readuntil(_HEAD_END))
                if status != 200:
                    length = int(headers.get("content-length", "0"))
                    detail = await reader.readexactly(length)
                    raise StreamError(f"HTTP {status}: {detail[:200]!r}")
                if headers.get("transfer-encoding") != "chunked":
                    raise StreamError("the stream is not chunked")
                while True:
                    size = int((await reader.readuntil(_CRLF)).partition(b";")[0], 16)
                    if size == 0:
                        await reader.readuntil(_CRLF)  # end of the (empty) trailer section
                        break
                    chunk = await reader.readexactly(size + 2)
                    if first is None:
                        first = time.perf_counter()
                    chunks.append(chunk[:-2])
            finished = time.perf_counter()
            tokens = final_event_tokens(b"".join(chunks))
        except (
            OSError,
            EOFError,  # asyncio.IncompleteReadError: the peer closed mid-response
            asyncio.LimitOverrunError,
            ValueError,
            TimeoutError,
            StreamError,
        ) as exc:
            await self.aclose()
            return _failed(started, first, exc)
        if headers.get("connection") == "close":
            await self.aclose()
        return RequestRecord(started, first, finished, tokens)

    async def aclose(self) -> None:
        """Close the connection, if open."""
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()
            with contextlib.suppress(OSError):  # the peer went away first: closed either way
                await streams[1].wait_closed()


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status code and lower-cased headers of an HTTP/1.1 response head."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise StreamError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip().lower()
    return int(rest.partition(" ")[0]), headers


class _HttpxClient:
    """Streams through a shared ``httpx.AsyncClient`` (its pool holds the connections)."""

    def __init__(self, client: Any, body: bytes, timeout_s: float) -> None:
        self._client = client
        self._body = body
        self._timeout_s = timeout_s

    async def generate(self) -> RequestRecord:
        import httpx

        started = time.perf_counter()
        first: float | None = None
        chunks: list[bytes] = []
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._client.stream(
                    "POST",
                    "/generate",
                    content=self._body,
                    headers={"Content-Type": "application/json"},
                ) as response:
                    if response.status_code != 200:
                        detail = await response.aread()
                        raise StreamError(f"HTTP {response.status_code}: {detail[:200]!r}")
                    async for chunk in response.aiter_raw():
                        if first is None:
                            first = time.perf_counter()
                        chunks.append(chunk)
            finished = time.perf_counter()
            tokens = final_event_tokens(b"".join(chunks))
        except (httpx.HTTPError, OSError, TimeoutError, StreamError) as exc:
            return _failed(started, first, exc)
        return RequestRecord(started, first, finished, tokens)


@asynccontextmanager
async def open_clients(
    kind: ClientKind, *, host: str, port: int, body: bytes, count: int, timeout_s: float
) -> AsyncIterator[list[StreamClient]]:
    """``count`` clients of ``kind`` sending ``body``; their connections closed on exit."""
    if kind == "raw":
        raw = [_RawClient(host, port, body, timeout_s) for _ in range(count)]
        try:
            yield list(raw)
        finally:
            await asyncio.gather(*(client.aclose() for client in raw), return_exceptions=True)
        return
    import httpx

    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(
        base_url=f"http://{host}:{port}", limits=limits, timeout=timeout_s, http2=False
    ) as shared:
        yield [_HttpxClient(shared, body, timeout_s) for _ in range(count)]
