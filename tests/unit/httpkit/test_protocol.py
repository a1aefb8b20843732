"""The limited httptools protocol (``httpkit.protocol``) on a loopback port: the edge cases
of counting a head and timing a request, over raw sockets (the integration tests try
every limit on the real worker and admin app)."""

from __future__ import annotations

import contextlib
import re
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from httpkit.limits import HttpLimits, Refusals
from httpkit.protocol import limited_protocol
from httpkit.serving import listen_socket
from tests.support.eventually import wait_until

LIMITS = HttpLimits(
    max_header_bytes=4096,
    header_timeout_s=0.3,
    body_timeout_s=0.3,
    keep_alive_s=0.6,
    max_connections=3,
)


class App:
    """``GET /`` answers ``ok``; ``POST /read`` reads its body and answers its size;
    ``POST /early`` answers without reading it. Records what each request saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        size = 0
        if scope["path"] == "/read":
            while True:
                message = await receive()
                self.seen.append(message["type"])
                size += len(message.get("body", b""))
                if message["type"] != "http.request" or not message.get("more_body"):
                    break
        body = str(size).encode() if scope["path"] == "/read" else b"ok"
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def served(app: App, counted: list[str]) -> Iterator[int]:
    """Serve ``app`` under :data:`LIMITS` from a thread; its port."""
    sock = listen_socket("127.0.0.1", 0)
    protocol = limited_protocol(LIMITS, Refusals(counted=counted.append))
    config = uvicorn.Config(
        app, http=protocol, lifespan="on", log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="limited")
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), 10.0, "the server")
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(10.0)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


@pytest.fixture
def counted() -> list[str]:
    return []


@pytest.fixture
def app() -> App:
    return App()


@pytest.fixture
def port(app: App, counted: list[str]) -> Iterator[int]:
    with served(app, counted) as bound:
        yield bound


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5.0)


def responses(sock: socket.socket, count: int, deadline_s: float = 5.0) -> list[bytes]:
    """``count`` whole responses (each with a Content-Length), or fewer if the connection
    closes or ``deadline_s`` passes."""
    data, found = b"", []
    end = time.monotonic() + deadline_s
    while len(found) < count and time.monotonic() < end:
        head, separator, rest = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length: *(\d+)", head)
        if separator and length and len(rest) >= int(length.group(1)):
            found.append(head + separator + rest[: int(length.group(1))])
            data = rest[int(length.group(1)) :]
            continue
        readable, _, _ = select.select([sock], [], [], max(0.0, end - time.monotonic()))
        chunk = sock.recv(65536) if readable else b""
        if not chunk:
            break
        data += chunk
    return found


def closed_within(sock: socket.socket, seconds: float) -> float:
    """The seconds until the server closes ``sock`` (reading and dropping what comes)."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        readable, _, _ = select.select([sock], [], [], seconds)
        if readable:
            try:
                if not sock.recv(65536):
                    return time.monotonic() - began
            except ConnectionResetError:
                return time.monotonic() - began
    raise AssertionError(f"still open after {seconds} s")


GET = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"


class TestHeadSize:
    """The head limit counts the head, not the body read with it."""

    def test_a_large_head_in_one_read_is_431(self, port: int, counted: list[str]) -> None:
        """A head over the limit that arrives whole in one read is still refused."""
        with connect(port) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 5000 + b"\r\n\r\n")
            (answer,) = responses(sock, 1)
        assert answer.startswith(b"HTTP/1.1 431 ") and b"connection: close" in answer
        assert counted == ["header_too_large"]

    def test_a_small_head_with_a_large_body_in_one_read_is_served(self, port: int) -> None:
        """A body read together with its head does not count toward the head."""
        body = b"x" * 20000
        head = b"POST /read HTTP/1.1\r\nHost: localhost\r\nContent-Length: 20000\r\n\r\n"
        with connect(port) as sock:
            sock.sendall(head + body)
            (answer,) = responses(sock, 1)
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"20000")

    def test_pipelined_requests_are_served(self, port: int) -> None:
        """Three requests in one write, within the limit together, get three answers."""
        with connect(port) as sock:
            sock.sendall(GET * 3)
            assert len(responses(sock, 3)) == 3


class TestTimeouts:
    """Deadlines on a head, a body and an idle connection."""

    def test_a_second_request_trickled_is_408(self, port: int, counted: list[str]) -> None:
        """On a kept-alive connection, the next head has header_timeout_s from its first
        byte; the first request was served."""
        with connect(port) as sock:
            sock.sendall(GET)
            assert responses(sock, 1)[0].startswith(b"HTTP/1.1 200 ")
            sock.sendall(b"GET / HT")
            (answer,) = responses(sock, 1)
        assert answer.startswith(b"HTTP/1.1 408 ") and counted == ["header_timeout"]

    def test_a_stalled_body_ends_as_a_disconnect(
        self, port: int, app: App, counted: list[str]
    ) -> None:
        """A body that stops arriving is 408; the app reading it sees a disconnect and
        answers nothing more."""
        with connect(port) as sock:
            sock.sendall(b"POST /read HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nab")
            answers = responses(sock, 2, deadline_s=2.0)
        assert len(answers) == 1 and answers[0].startswith(b"HTTP/1.1 408 ")
        assert counted == ["body_timeout"]
        wait_until(lambda: "http.disconnect" in app.seen, 5.0, "the app to see a disconnect")

    def test_an_unread_body_answered_early_is_closed(self, port: int, counted: list[str]) -> None:
        """When the app answered before the body came, a body that then stalls closes the
        connection after body_timeout_s without a second answer."""
        with connect(port) as sock:
            sock.sendall(b"POST /early HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n")
            assert responses(sock, 1)[0].startswith(b"HTTP/1.1 200 ")
            assert closed_within(sock, 3.0) >= 0.2
        assert counted == ["body_timeout"]

    def test_a_connection_is_closed_idle_after_its_response(self, port: int) -> None:
        """After a response, keep_alive_s without a request closes the connection."""
        with connect(port) as sock:
            sock.sendall(GET)
            responses(sock, 1)
            assert LIMITS.keep_alive_s - 0.1 <= closed_within(sock, 5.0)


class TestConnections:
    """The connection limit."""

    def test_beyond_the_limit_is_503_at_once(self, port: int, counted: list[str]) -> None:
        """The connection past max_connections is answered without sending anything."""
        with contextlib.ExitStack() as stack:
            for _ in range(LIMITS.max_connections):
                sock = stack.enter_context(connect(port))
                sock.sendall(GET)
                responses(sock, 1)
            with connect(port) as extra:
                (answer,) = responses(extra, 1)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in answer
        assert counted == ["too_many_connections"]
