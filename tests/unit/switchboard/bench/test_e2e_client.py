"""Tests for the streaming client of ``switchboard bench e2e`` (switchboard.bench.e2e_client):
reading the final SSE event, and both transports against a small in-process HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from switchboard.bench.e2e_client import (
    ClientKind,
    StreamError,
    final_event_tokens,
    generate_body,
    open_clients,
)
from switchboard.bench.e2e_stats import RequestRecord


def _stream(*events: bytes) -> bytes:
    return b"".join(b"data: " + event + b"\n\n" for event in (*events, b"[DONE]"))


FINAL = b'{"text":"ab","meta_info":{"completion_tokens":2,"finish_reason":{"type":"length"}}}'
FIRST = b'{"text":"a","meta_info":{"completion_tokens":1,"finish_reason":null}}'


class TestFinalEvent:
    def test_reads_completion_tokens_of_the_last_event(self) -> None:
        """The last event before [DONE] gives the token count."""
        assert final_event_tokens(_stream(FIRST, FINAL)) == 2

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (_stream(FIRST, FINAL)[: -len(b"data: [DONE]\n\n")], "DONE"),
            (_stream(b'{"error":{"message":"engine gone"}}'), "engine gone"),
            (_stream(FIRST), "finish reason"),
            (_stream(b"{not json"), "undecodable"),
            (b"data: [DONE]\n\n", "DONE"),
        ],
    )
    def test_incomplete_or_failed_streams_raise(self, body: bytes, message: str) -> None:
        """A stream without [DONE], with an error event or without a finish is an error."""
        with pytest.raises(StreamError, match=message):
            final_event_tokens(body)


class _SseServer:
    """A keep-alive HTTP/1.1 server: every POST gets a chunked SSE stream, except the
    third, which gets a 503. Every connection it accepted is closed by :meth:`close`."""

    def __init__(self) -> None:
        self.served = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                json.loads(await reader.readexactly(length))
                self.served += 1
                writer.write(self._response())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the client went away

    def _response(self) -> bytes:
        if self.served == 3:
            body = b'{"detail":"draining"}'
            return b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s" % (
                len(body),
                body,
            )
        chunks = [event + b"\n\n" for event in _stream(FIRST, FINAL).split(b"\n\n")[:-1]]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks)
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def _four_requests(kind: ClientKind) -> list[RequestRecord]:
    fake = _SseServer()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    body = generate_body("hi", 2)
    try:
        async with open_clients(
            kind, host="127.0.0.1", port=port, body=body, count=1, timeout_s=5.0
        ) as clients:
            return [await clients[0].generate() for _ in range(4)]
    finally:
        server.close()
        await fake.close()
        await server.wait_closed()


class TestClients:
    @pytest.mark.parametrize("kind", ["raw", "httpx"])
    def test_streams_over_one_connection_and_reports_failures(self, kind: ClientKind) -> None:
        """Both transports decode chunked SSE, stamp the first chunk, keep the connection
        alive across requests, and report an HTTP error as a failed record."""
        records = asyncio.run(_four_requests(kind))
        ok = [r for r in records if r.error is None]
        assert [r.tokens for r in ok] == [2, 2, 2]
        for record in ok:
            assert record.first is not None
            assert record.started <= record.first <= record.finished
        assert records[2].error is not None
        assert "503" in records[2].error
