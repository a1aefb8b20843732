"""MutationGuard in the real admin app, served by uvicorn (httptools) on a loopback port
over the canned routers (the ``routers`` fixture, which answer ``metrics`` only, so every
command the router is asked for fails 503): a mutation's token is decided before its body
is read, and every mutation attempt, refused or not, writes one audit record."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from app import routers
from app.catalogue import COMMANDS
from app.guard import audited_route
from app.main import create_app
from app.settings import AdminSettings
from tests.support.eventually import wait_until
from tests.unit.httpkit.served import WAIT_S, served

OPS = "o" * 32
VIEWER = "v" * 32


@dataclass
class Served:
    """The admin app at ``url``, its audit file and its ``switchboard.audit`` lines."""

    app: FastAPI
    url: str
    audit_file: Path
    caplog: pytest.LogCaptureFixture

    def client(self, token: str | None = OPS) -> httpx.Client:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=WAIT_S)

    def records(self) -> list[dict[str, Any]]:
        if not self.audit_file.exists():
            return []
        return [json.loads(line) for line in self.audit_file.read_text().splitlines()]

    def lines(self) -> list[str]:
        return [
            record.getMessage()
            for record in self.caplog.records
            if record.name == "switchboard.audit" and record.levelno == logging.INFO
        ]

    def only_record(self) -> dict[str, Any]:
        """The one record written so far (the request's answer is sent before its
        record is written: poll for it)."""
        (record,) = wait_until(self.records, WAIT_S, "the audit record")
        return record


@pytest.fixture
def served_app(
    routers: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> Iterator[Served]:
    """The admin app with an operator (``ops``) and a viewer (``viewer``) token and an
    audit file, served over the canned routers."""
    settings = AdminSettings(
        control_endpoint=routers[0],
        operator_tokens=f"ops:{OPS}",  # type: ignore[arg-type]
        viewer_tokens=f"viewer:{VIEWER}",  # type: ignore[arg-type]
        audit_log=tmp_path / "audit.jsonl",
        control_timeout_s=2.0,
    )
    app = create_app(settings)
    caplog.set_level(logging.INFO, logger="switchboard.audit")
    with served(app) as url:
        yield Served(app, url, tmp_path / "audit.jsonl", caplog)


def raw_request(url: str, head: str) -> tuple[socket.socket, bytes]:
    """Send ``head`` (request line and headers) and no body; the socket and whatever the
    server answers until it closes the connection (or WAIT_S passes: a failure)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
    sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return sock, answer


class TestRefusalsAreAudited:
    """Every refused mutation writes one record with who, status and reason."""

    @pytest.mark.parametrize(
        ("token", "status", "reason", "who"),
        [
            (None, 401, "unauthorized", None),
            ("nobody-has-this-token-at-all", 401, "unauthorized", None),
            (VIEWER, 403, "forbidden", "viewer"),
        ],
    )
    def test_unauthorized_and_forbidden(
        self, served_app: Served, token: str | None, status: int, reason: str, who: str | None
    ) -> None:
        """No token, an unknown one, a viewer's: answered, and audited as refused."""
        with served_app.client(token) as client:
            assert client.post("/api/pause", json={"mode": "abort"}).status_code == status
        record = served_app.only_record()
        assert record["who"] == who and record["action"] == "pause"
        assert (record["result"], record["status"], record["reason"]) == (
            "refused",
            status,
            reason,
        )
        assert record["target"] == "all" and record["client"].startswith("127.0.0.1:")
        assert list(record)[:9] == [
            "time",
            "who",
            "action",
            "target",
            "result",
            "status",
            "reason",
            "detail",
            "client",
        ]

    def test_bad_body(self, served_app: Served) -> None:
        """A body that fails validation: 400, audited with the operator and the message."""
        with served_app.client() as client:
            assert client.post("/api/pause", json={"mode": "sideways"}).status_code == 400
        record = served_app.only_record()
        assert (record["who"], record["result"], record["reason"]) == (
            "ops",
            "refused",
            "bad_request",
        )
        assert "mode" in record["detail"]

    def test_body_too_large(self, served_app: Served) -> None:
        """A body over the limit from an operator: 413, audited as body_too_large."""
        with served_app.client() as client:
            answer = client.post("/api/continue", content=b"x" * (2 * 1024 * 1024))
            assert answer.status_code == 413
        record = served_app.only_record()
        assert (record["who"], record["status"], record["reason"]) == (
            "ops",
            413,
            "body_too_large",
        )

    def test_router_failure_is_an_error(self, served_app: Served) -> None:
        """A router that cannot do it: 503, audited as error (it may not have applied it)."""
        with served_app.client() as client:
            assert client.post("/api/workers/w0/drain").status_code == 503
        record = served_app.only_record()
        assert (record["action"], record["target"], record["result"], record["reason"]) == (
            "drain",
            "w0",
            "error",
            "router_unavailable",
        )

    def test_an_exception_is_audited_and_answered_500(
        self, served_app: Served, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A handler that raises: 500, audited as an internal error."""

        async def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("boom")

        with served_app.client() as client:
            client.get("/healthz")  # the lifespan has run: the router client exists
            monkeypatch.setattr(served_app.app.state.admin.router, "call", broken)
            assert client.post("/api/freeze_gc").status_code == 500
        record = served_app.only_record()
        assert (record["status"], record["result"], record["reason"]) == (
            500,
            "error",
            "internal_error",
        )

    def test_alias_paths_are_audited(self, served_app: Served) -> None:
        """SGLang's /pause_generation is the pause command, audited as such."""
        with served_app.client(None) as client:
            assert client.post("/pause_generation").status_code == 401
        assert served_app.only_record()["action"] == "pause"

    def test_reads_are_not_audited(self, served_app: Served) -> None:
        """Reads, unknown paths and wrong methods write nothing."""
        with served_app.client() as client:
            client.get("/api/workers")
            client.get("/api/status")
            assert client.get("/api/pause").status_code == 405
            assert client.post("/api/nothing").status_code == 404
            assert client.post("/api/workers/w0/drain/more").status_code == 404
            client.post("/api/freeze_gc")  # a mark: the one record expected
        assert served_app.only_record()["action"] == "freeze_gc"


class TestForgedTargets:
    """A worker id from the path cannot forge or hide an audit line."""

    def test_control_characters_in_the_target(self, served_app: Served) -> None:
        """A target with a newline and ESC is escaped on the log line and exact in the file."""
        with served_app.client(None) as client:
            assert (
                client.post("/api/workers/w0%0Aaudit%20who=root%1B%5B2K/drain").status_code == 401
            )
        record = served_app.only_record()
        assert record["target"] == "w0\naudit who=root\x1b[2K"
        (line,) = wait_until(served_app.lines, WAIT_S, "the audit line")
        assert line.isprintable() and "\x1b" not in line
        assert 'target="w0\\naudit who=root\\x1b[2K"' in line


class TestAuthorizationBeforeTheBody:
    """A mutation without an operator's token is answered before its body is read."""

    @pytest.mark.parametrize(("token", "status"), [(None, 401), (VIEWER, 403)])
    @pytest.mark.parametrize("length", [1000, 200 * 1024 * 1024])
    def test_refused_without_the_body(
        self, served_app: Served, token: str | None, status: int, length: int
    ) -> None:
        """Headers declaring a body (within the limit, or 200 MiB), and no body sent: the
        refusal arrives at once and the connection is closed (a server waiting for the
        body would answer nothing before the socket's timeout)."""
        authorization = "" if token is None else f"Authorization: Bearer {token}\n"
        head = (
            f"POST /api/pause HTTP/1.1\nHost: x\n{authorization}"
            f"Content-Type: application/json\nContent-Length: {length}\n"
        )
        sock, answer = raw_request(served_app.url, head)
        sock.close()
        assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
        headers = answer.split(b"\r\n\r\n")[0].lower()
        assert b"\r\nconnection: close" in headers

    def test_chunked_body_is_not_read(self, served_app: Served) -> None:
        """A chunked body without a token: 401 before the first chunk (the body limit,
        which reads a chunked body ahead, comes after the token check)."""
        head = "POST /api/continue HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n"
        sock, answer = raw_request(served_app.url, head)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]

    def test_an_operator_with_no_body_keeps_the_connection(self, served_app: Served) -> None:
        """An empty mutation from an operator is answered normally, keep-alive and all."""
        with served_app.client() as client:
            answer = client.post("/api/freeze_gc")
        assert answer.status_code == 503
        assert answer.headers.get("connection") != "close"


class TestAuditedRoutes:
    """The guard's view of the mutations is the catalogue's and the app's."""

    def test_every_post_route_is_audited_and_no_get(self) -> None:
        """Each route the app serves is guarded exactly when it is an audited command."""
        audited = {(e.method, p) for e in COMMANDS if e.audited for p in e.paths}
        served = set()
        for name in routers.__all__:
            for route in getattr(routers, name).router.routes:
                assert isinstance(route, APIRoute)
                for method in route.methods or ():
                    sample = route.path.replace("{worker_id}", "w-1")
                    found = audited_route(method, sample)
                    assert (found is not None) == ((method, route.path) in audited), route.path
                    served.add((method, route.path))
        assert audited <= served

    def test_targets(self) -> None:
        """A worker's command targets the worker; the others target all."""
        assert audited_route("POST", "/api/workers/w 1/undrain") == (
            next(e for e in COMMANDS if e.name == "undrain"),
            "w 1",
        )
        found = audited_route("POST", "/continue_generation")
        assert found is not None and found[1] == "all"
        assert audited_route("POST", "/api/workers//drain") is None
