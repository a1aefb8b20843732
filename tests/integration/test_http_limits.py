"""The HTTP limits of a real worker and a real admin app, over raw sockets.

One worker (``switchboard worker``, no router: its HTTP layer answers all the same) and
one admin app (``switchboard admin``) run with short limits. Each limit is tried on both
ports: an oversized head (431, memory flat while 256 MiB arrive, the event loop still
answering), a trickled head and a trickled body (408 within the timeout), a connection
that never sends (closed after the keep-alive), one connection past the limit (503, the
open ones still served) and a ``Host`` or ``Origin`` not allowed (421, 403). The measured
figures are printed (``pytest -s``). Last, one ``switchboard up`` shows its settings reach
both kinds of children.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest

from tests.integration.harness import ManagedProcess, ProcessManager, child_env, wait_until
from tests.integration.harness.admin_stack import admin_stack
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.scrape import sample_sum, scrape

pytestmark = pytest.mark.integration

HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 2.0
KEEP_ALIVE_S = 3.0
MAX_CONNECTIONS = 8
MAX_HEADER_BYTES = 64 * 1024
#: A name the servers are told to allow.
ALLOWED_NAME = "api.example.test"
LIMIT_FLAGS = (
    *("--max-header-bytes", str(MAX_HEADER_BYTES)),
    *("--header-timeout-s", str(HEADER_TIMEOUT_S)),
    *("--body-timeout-s", str(BODY_TIMEOUT_S)),
    *("--keep-alive-s", str(KEEP_ALIVE_S)),
    *("--max-connections", str(MAX_CONNECTIONS)),
    *("--allowed-hosts", ALLOWED_NAME),
)
#: Slack for a loaded 2-core machine on top of a timeout.
SLACK_S = 1.5
MIB = 1024 * 1024


@dataclass
class Server:
    """One running server: its process, port, a path that answers, and a token."""

    name: str
    process: ManagedProcess
    port: int
    #: A GET that answers at once (any status).
    probe: str
    #: A POST whose handler reads its body, and the headers it needs besides the body's.
    body_path: str
    body_headers: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10.0)

    def memory_kib(self) -> tuple[int, int]:
        """``VmRSS`` and ``VmHWM`` (peak RSS) of the process, in KiB."""
        fields = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def _answers(server: Server) -> bool:
    server.process.assert_running()
    try:
        httpx.get(server.url + server.probe, timeout=2.0)
    except httpx.HTTPError:
        return False
    return True


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    """A worker and an admin app under :data:`LIMIT_FLAGS`, stopped and checked at the end."""
    log_dir = tmp_path_factory.mktemp("http-limits")
    run_dir = Path(tmp_path_factory.mktemp("run"))
    processes = ProcessManager(log_dir)
    token = secrets.token_hex(24)
    env = {k: v for k, v in child_env().items() if not k.startswith("SWITCHBOARD_")}
    base = [sys.executable, "-m", "switchboard.cli"]
    common = ["--run-dir", str(run_dir), "--parent-pid", str(os.getpid()), *LIMIT_FLAGS]
    worker_port, admin_port = free_port(), free_port()
    json_body = {"Content-Type": "application/json"}
    running: dict[str, Server] = {}
    try:
        worker = processes.spawn(
            "worker",
            [*base, "worker", *common, "--worker-id", "w0", "--port", str(worker_port)],
            env=env,
        )
        running["worker"] = Server(
            "worker", worker, worker_port, "/get_server_info", "/generate", json_body
        )
        # The worker writes the run dir's stack key, which the admin app only reads.
        wait_until(partial(_answers, running["worker"]), 60.0, "the worker to answer", 0.05)
        admin = processes.spawn(
            "admin",
            [*base, "admin", *common, "--port", str(admin_port)],
            env={**env, "SWITCHBOARD_ADMIN_OPERATOR_TOKENS": f"ops:{token}"},
        )
        headers = {**json_body, "Authorization": f"Bearer {token}"}
        running["admin"] = Server("admin", admin, admin_port, "/healthz", "/api/pause", headers)
        wait_until(partial(_answers, running["admin"]), 60.0, "the admin app to answer", 0.05)
        yield running
    finally:
        problems = processes.shutdown()
        if problems:
            print(processes.dump_logs())
        assert not problems, "\n".join(problems)


def _read_answer(sock: socket.socket, deadline_s: float) -> tuple[bytes, bool]:
    """What arrives within ``deadline_s``, and whether the server closed the connection."""
    data = b""
    end = time.monotonic() + deadline_s
    while (left := end - time.monotonic()) > 0:
        readable, _, _ = select.select([sock], [], [], left)
        if not readable:
            break
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def _read_response(sock: socket.socket, deadline_s: float = 5.0) -> bytes:
    """One whole response (its head and its ``Content-Length`` of body) on a connection
    that stays open; what arrived if the server closed first or ``deadline_s`` passed."""
    data = b""
    end = time.monotonic() + deadline_s
    while (left := end - time.monotonic()) > 0:
        head, separator, body = data.partition(b"\r\n\r\n")
        if separator:
            length = re.search(rb"(?im)^content-length: *(\d+)", head)
            if length is not None and len(body) >= int(length.group(1)):
                return data
        readable, _, _ = select.select([sock], [], [], left)
        chunk = sock.recv(65536) if readable else b""
        if not chunk:
            break
        data += chunk
    return data


def _status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def _error(answer: bytes) -> dict[str, object]:
    """The JSON error object of a raw answer."""
    body = answer.partition(b"\r\n\r\n")[2]
    error = json.loads(body)["error"]
    assert isinstance(error, dict)
    return error


def _trickle(sock: socket.socket, start: bytes, every_s: float, bound_s: float) -> float:
    """Send ``start``, then one byte every ``every_s`` until the server answers or closes;
    the seconds from ``start`` to that (failing past ``bound_s``)."""
    began = time.monotonic()
    sock.sendall(start)
    while time.monotonic() - began < bound_s:
        readable, _, _ = select.select([sock], [], [], every_s)
        if readable:
            return time.monotonic() - began
        with contextlib.suppress(OSError):
            sock.sendall(b"a")
    raise AssertionError(f"still open {bound_s} s after the first byte")


class _Prober(threading.Thread):
    """Asks a server's probe path over and over; the slowest answer's seconds."""

    def __init__(self, server: Server) -> None:
        super().__init__(name=f"probe-{server.name}", daemon=True)
        self.server = server
        self.stop = threading.Event()
        self.slowest = 0.0
        self.answered = 0
        self.failed: list[str] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.server.url, timeout=30.0, trust_env=False) as client:
            while not self.stop.is_set():
                began = time.monotonic()
                try:
                    client.get(self.server.probe)
                except httpx.HTTPError as error:
                    self.failed.append(repr(error))
                    continue
                self.slowest = max(self.slowest, time.monotonic() - began)
                self.answered += 1


@pytest.mark.parametrize("name", ["worker", "admin"])
class TestHttpLimits:
    """Each limit, on the worker's port and on the admin app's."""

    def test_a_32_mib_header_is_431(self, servers: dict[str, Server], name: str) -> None:
        """A request with a 32 MiB header is answered 431 and closed, never read whole."""
        server = servers[name]
        with server.connect() as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            sent = 0
            answer = b""
            while sent < 32 * MIB:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break
                try:
                    sock.sendall(b"a" * MIB)
                except OSError:
                    break
                sent += MIB
            answer, closed = _read_answer(sock, 10.0)
        assert _status(answer) == 431 and closed
        assert _error(answer)["message"] == (
            f"the request head exceeds {MAX_HEADER_BYTES} bytes (max_header_bytes)"
        )
        assert sent < 32 * MIB, "the server read the whole 32 MiB before answering"

    def test_a_256_mib_head_leaves_memory_flat(self, servers: dict[str, Server], name: str) -> None:
        """256 MiB of unfinished head, sent as fast as loopback takes it, is answered 431;
        the process's peak RSS grows by under 16 MiB and it keeps answering others."""
        server = servers[name]
        rss_before, peak_before = server.memory_kib()
        prober = _Prober(server)
        prober.start()
        wait_until(lambda: prober.answered, 10.0, "a first probe")
        chunk = b"a" * MIB
        sent, answer = 0, b""
        began = time.monotonic()
        try:
            with server.connect() as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
                sock.setblocking(False)  # from here: send what fits, read what comes
                # Sends on after the answer and its end of stream, as an attacker
                # would, until the server drops the connection.
                reading = [sock]
                while sent < 256 * MIB and time.monotonic() - began < 20.0:
                    readable, writable, _ = select.select(reading, [sock], [], 1.0)
                    if readable:
                        data = sock.recv(65536)
                        answer += data
                        if not data:
                            reading = []
                    if writable:
                        try:
                            sent += sock.send(chunk)
                        except OSError:
                            break
        finally:
            prober.stop.set()
            prober.join(30.0)
        took = time.monotonic() - began
        rss_after, peak_after = server.memory_kib()
        print(
            f"\n{name}: 256 MiB head: sent {sent / MIB:.0f} MiB in {took:.2f} s; RSS "
            f"{rss_before / 1024:.1f} -> {rss_after / 1024:.1f} MB, peak {peak_before / 1024:.1f}"
            f" -> {peak_after / 1024:.1f} MB; {prober.answered} probes meanwhile, slowest "
            f"{prober.slowest * 1000:.0f} ms"
        )
        assert _status(answer) == 431
        assert peak_after - max(peak_before, rss_before) < 16 * 1024
        assert prober.answered > 0 and prober.slowest < 2.0 and not prober.failed

    def test_a_trickled_head_is_cut_off(self, servers: dict[str, Server], name: str) -> None:
        """A head trickling in one byte every 0.5 s is answered 408 once header_timeout_s
        have passed since its first byte (no gap between bytes is long)."""
        server = servers[name]
        with server.connect() as sock:
            took = _trickle(sock, b"GET / HTTP/1.1\r\nX-Slow: ", 0.5, HEADER_TIMEOUT_S + 10)
            answer, closed = _read_answer(sock, 5.0)
        print(f"\n{name}: trickled head cut off after {took:.2f} s")
        assert _status(answer) == 408 and closed
        assert _error(answer)["message"] == (
            f"the request head did not arrive within {HEADER_TIMEOUT_S:g} s (header_timeout_s)"
        )
        assert HEADER_TIMEOUT_S - 0.1 <= took <= HEADER_TIMEOUT_S + SLACK_S

    def test_a_trickled_body_is_cut_off(self, servers: dict[str, Server], name: str) -> None:
        """A body trickling in one byte every 0.5 s is answered 408 once body_timeout_s have
        passed since its head arrived."""
        server = servers[name]
        headers = {**server.body_headers, "Host": "127.0.0.1", "Content-Length": "1000"}
        head = f"POST {server.body_path} HTTP/1.1\r\n" + "".join(
            f"{key}: {value}\r\n" for key, value in headers.items()
        )
        with server.connect() as sock:
            took = _trickle(sock, head.encode() + b"\r\n{", 0.5, BODY_TIMEOUT_S + 10)
            answer, closed = _read_answer(sock, 5.0)
        print(f"\n{name}: trickled body cut off after {took:.2f} s")
        assert _status(answer) == 408 and closed
        assert BODY_TIMEOUT_S - 0.1 <= took <= BODY_TIMEOUT_S + SLACK_S

    def test_a_silent_connection_is_closed(self, servers: dict[str, Server], name: str) -> None:
        """A connection that never sends a byte is closed after keep_alive_s."""
        server = servers[name]
        with server.connect() as sock:
            began = time.monotonic()
            answer, closed = _read_answer(sock, KEEP_ALIVE_S + 10)
            took = time.monotonic() - began
        print(f"\n{name}: silent connection closed after {took:.2f} s")
        assert closed and answer == b""
        assert KEEP_ALIVE_S - 0.1 <= took <= KEEP_ALIVE_S + SLACK_S

    def test_a_connection_past_the_limit_is_503(
        self, servers: dict[str, Server], name: str
    ) -> None:
        """With max_connections open, the next connection is answered 503 and closed, and
        the open ones are served as before; one closed, a new one is served again."""
        server = servers[name]
        request = f"GET {server.probe} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        with contextlib.ExitStack() as stack:
            held = [stack.enter_context(server.connect()) for _ in range(MAX_CONNECTIONS)]
            for sock in held:
                sock.sendall(request)
                assert _read_response(sock).startswith(b"HTTP/1.1 200 ")
            refused = httpx.get(server.url + server.probe, timeout=10.0)
            assert refused.status_code == 503 and refused.headers["connection"] == "close"
            assert refused.headers["retry-after"] == "1"
            assert "max_connections" in json.dumps(refused.json())
            for sock in held:
                sock.sendall(request)
                assert _read_response(sock).startswith(b"HTTP/1.1 200 ")
            held.pop().close()

            def served_again() -> bool:
                return httpx.get(server.url + server.probe, timeout=10.0).status_code != 503

            wait_until(served_again, 5.0, "a new connection to be served")

    @pytest.mark.parametrize(
        "host", ["127.0.0.1", "localhost", "[::1]", "127.0.0.1:1", ALLOWED_NAME, "LOCALHOST"]
    )
    def test_allowed_hosts_are_served(
        self, servers: dict[str, Server], name: str, host: str
    ) -> None:
        """Loopback names (with or without a port) and the configured name are served."""
        server = servers[name]
        answer = httpx.get(server.url + server.probe, headers={"Host": host}, timeout=10.0)
        assert answer.status_code not in (403, 421), answer.text

    def test_another_host_is_421(self, servers: dict[str, Server], name: str) -> None:
        """A Host naming another server (a rebound DNS name) is answered 421, naming the
        setting that would allow it."""
        server = servers[name]
        answer = httpx.get(
            server.url + server.probe, headers={"Host": "evil.example:80"}, timeout=10.0
        )
        assert answer.status_code == 421
        message = answer.json()["error"]["message"]
        assert "'evil.example:80'" in message and "allowed-hosts" in message
        code = answer.json()["error"]["code"]
        assert code == (421 if name == "worker" else "host_not_allowed")

    @pytest.mark.parametrize(
        ("origin", "status"),
        [("http://evil.example", 403), ("null", 403), ("http://localhost:3000", None)],
    )
    def test_a_page_of_another_site_is_403(
        self, servers: dict[str, Server], name: str, origin: str, status: int | None
    ) -> None:
        """A request a browser sends from a page of another site (its Origin) is 403; one
        from a page on this machine is served."""
        server = servers[name]
        answer = httpx.get(server.url + server.probe, headers={"Origin": origin}, timeout=10.0)
        if status is None:
            assert answer.status_code not in (403, 421), answer.text
        else:
            assert answer.status_code == status and "Origin" in answer.json()["error"]["message"]


def test_the_worker_counts_its_refusals(servers: dict[str, Server]) -> None:
    """Each refusal of the worker's HTTP layer is counted under http_rejected by reason."""
    server = servers["worker"]
    httpx.get(server.url + server.probe, headers={"Host": "evil.example"}, timeout=10.0)
    info = httpx.get(server.url + "/get_server_info", timeout=10.0).json()
    rejected = info["worker"]["counters"]["http_rejected"]
    assert rejected["host_not_allowed"] >= 1


def test_switchboard_up_hands_the_limits_to_both(tmp_path: Path) -> None:
    """Under switchboard up, its allowed_hosts and max_header_bytes hold on the workers'
    port and the admin app's alike, and the supervisor's own 127.0.0.1 probes still pass
    (it became ready)."""
    extra = ("--allowed-hosts", ALLOWED_NAME, "--max-header-bytes", "8192")
    with admin_stack(tmp_path, workers=1, extra_args=extra) as stack:
        for url, probe in ((stack.base_url, "/health"), (stack.admin_url, "/healthz")):
            named = httpx.get(url + probe, headers={"Host": ALLOWED_NAME}, timeout=10.0)
            assert named.status_code == 200, named.text
            other = httpx.get(url + probe, headers={"Host": "evil.example"}, timeout=10.0)
            assert other.status_code == 421 and "allowed_hosts" in other.json()["error"]["message"]
            large = httpx.get(url + probe, headers={"X-Pad": "a" * 9000}, timeout=10.0)
            assert large.status_code == 431
        foreign = httpx.get(
            stack.base_url + "/health", headers={"Origin": "http://evil.example"}, timeout=10.0
        )
        assert foreign.status_code == 403
        # Refused before any route, so no http_requests_total series: the refusals family.
        text = scrape(stack)
        for reason in ("host_not_allowed", "header_too_large", "origin_not_allowed"):
            assert sample_sum(text, "switchboard_http_refusals_total", reason=reason) >= 1, reason
        assert sample_sum(text, "switchboard_http_refusals_total", reason="body_timeout") == 0
