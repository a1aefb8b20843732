"""A canned admin API for the operator-command tests (``http.server`` in a thread, on a free
loopback port), answering each ``(method, path)`` with canned JSON and recording what it was
sent; and one operator command run against it."""

from __future__ import annotations

import argparse
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from switchboard.admin_cli import run
from switchboard.cli import build_parser

__all__ = [
    "STALL_S",
    "TOKEN",
    "CannedApi",
    "Result",
    "Seen",
    "free_port",
    "handler_for",
    "invoke",
    "parse",
]

TOKEN = "op-token-123"
#: How long a stalled answer waits for the test to end (the client gives up long before).
STALL_S = 10.0


@dataclass
class Seen:
    """One request the canned API received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class CannedApi:
    """Answers by ``(method, path)``; ``stall`` paths wait until the test ends."""

    url: str = ""
    routes: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    stall: set[str] = field(default_factory=set)
    released: threading.Event = field(default_factory=threading.Event)

    def answer(self, method: str, path: str, status: int, body: Any) -> None:
        self.routes[(method, path)] = (status, body)


def handler_for(api: CannedApi) -> type[BaseHTTPRequestHandler]:
    """A request handler class answering from ``api`` and recording each request in it."""

    class Handler(BaseHTTPRequestHandler):
        def _respond(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            api.requests.append(
                Seen(
                    self.command,
                    self.path,
                    dict(self.headers.items()),
                    json.loads(raw) if raw else None,
                )
            )
            if self.path in api.stall:
                api.released.wait(STALL_S)
            status, body = api.routes.get(
                (self.command, self.path),
                (404, {"error": {"code": "not_found", "message": f"no route {self.path}"}}),
            )
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _respond

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test reads ``api.requests`` instead."""

    return Handler


def parse(*words: str) -> argparse.Namespace:
    """``words`` parsed as switchboard.cli parses them: the operator commands' parsers
    alone, their usage errors exit 2 (SystemExit)."""
    return build_parser(words[0]).parse_args(list(words))


@dataclass
class Result:
    """One command's exit status and output."""

    status: int
    out: str
    err: str


def invoke(capsys: pytest.CaptureFixture[str], api: CannedApi | None, *words: str) -> Result:
    """Run one command against ``api`` with the operator token; its exit status and output."""
    connection = ["--url", api.url, "--token", TOKEN] if api is not None else []
    try:
        code = run(parse(*words, *connection))
    except SystemExit as exited:
        # A usage error found while parsing, before any request.
        code = exited.code if isinstance(exited.code, int) else 1
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def free_port() -> int:
    """A loopback port nobody listens on (as the test starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
