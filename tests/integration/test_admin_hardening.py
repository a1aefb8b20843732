"""The admin app's hardening against a real stack (``switchboard up --admin-audit-log``):
a mutation without an operator's token is answered before its body is read (raw sockets,
the admin process's memory watched), every mutation attempt is one JSON line in the audit
file and one printable line on the log, refused ones included, every response carries the
security headers, the console works under its CSP at ``/static/index.html`` and cannot be
framed, and ``switchboard admin`` refuses short tokens when exposed and an audit file it
cannot open."""

from __future__ import annotations

import json
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import psutil
import pytest

from app.headers import API_CSP, CONSOLE_CSP
from router_core.credentials import KEY_FILE, load_or_create
from tests.integration.harness import REPO_ROOT, child_env, wait_until
from tests.integration.harness.admin_stack import AdminStack
from tests.integration.harness.console_page import UI_TIMEOUT_MS, console_page
from tests.integration.harness.http_stack import free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.integration

#: What the 200 MiB body of the original finding declares.
HUGE = 200 * 1024 * 1024
#: A refusal must come at once: well under any read timeout.
PROMPT_S = 2.0
#: How much the admin process may grow while refusing bodies it must not read.
FLAT_RSS_BYTES = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def audited_workers() -> int:
    """One worker: the audit trail test drains and undrains the only one."""
    return 1


@pytest.fixture(scope="module")
def stack(audited_stack: AdminStack) -> AdminStack:
    """One worker, the admin app and its audit file (conftest's ``audited_stack``)."""
    return audited_stack


def records(audit_file: Path) -> list[dict[str, Any]]:
    """Every record of the audit file so far."""
    return [json.loads(line) for line in audit_file.read_text().splitlines()]


def new_records(audit_file: Path, before: int, count: int) -> list[dict[str, Any]]:
    """The ``count`` records after the first ``before``, once they are all written."""

    def written() -> list[dict[str, Any]] | None:
        found = records(audit_file)[before:] if audit_file.exists() else []
        return found if len(found) >= count else None

    return wait_until(written, 10.0, f"{count} new audit records")


def admin_address(stack: AdminStack) -> tuple[str, int]:
    url = httpx.URL(stack.admin_url)
    assert url.host is not None and url.port is not None
    return url.host, url.port


def send_head(stack: AdminStack, head: str) -> socket.socket:
    """A connection to the admin app that has sent ``head`` (no body)."""
    sock = socket.create_connection(admin_address(stack), timeout=10.0)
    sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
    return sock


def pause_head(length: int, token: str | None) -> str:
    authorization = "" if token is None else f"Authorization: Bearer {token}\n"
    return (
        f"POST /api/pause HTTP/1.1\nHost: 127.0.0.1\n{authorization}"
        f"Content-Type: application/json\nContent-Length: {length}\n"
    )


def admin_process(stack: AdminStack) -> psutil.Process:
    (process,) = stack.role_processes("admin")
    return process


class TestAuthorizationBeforeTheBody:
    """No operator token: answered from the headers, the body never read."""

    @pytest.mark.parametrize(("who", "status"), [("nobody", 401), ("viewer", 403)])
    def test_200_mib_declared_and_none_sent(self, stack: AdminStack, who: str, status: int) -> None:
        """Content-Length: 209715200, no body: the refusal arrives within 2 s and the
        connection is closed (an app reading the body would still be waiting for it)."""
        token = None if who == "nobody" else stack.viewer_token
        started = time.monotonic()
        with send_head(stack, pause_head(HUGE, token)) as sock:
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert time.monotonic() - started < PROMPT_S
        assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
        assert b"\r\nconnection: close\r\n" in answer.lower()
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] in (
            "unauthorized",
            "forbidden",
        )

    def test_memory_stays_flat_while_bodies_are_pushed(self, stack: AdminStack) -> None:
        """Eight clients each declare 200 MiB and push as much as the server takes: the
        server stops taking it after the refusal (none gets 64 MiB through) and the admin
        process's memory grows by less than 16 MiB."""
        process = admin_process(stack)
        with stack.client() as client:
            client.get("/api/status").raise_for_status()  # warm: allocations of a first call
        before = process.memory_info().rss
        chunk = b"x" * (1024 * 1024)
        for _ in range(8):
            pushed = 0
            started = time.monotonic()
            with send_head(stack, pause_head(HUGE, None)) as sock:
                try:
                    while pushed < 64 * len(chunk):
                        pushed += sock.send(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass
            assert pushed < 64 * len(chunk), "the server kept reading a refused body"
            assert time.monotonic() - started < 10.0
        grown = process.memory_info().rss - before
        assert grown < FLAT_RSS_BYTES, f"the admin app grew by {grown / 2**20:.1f} MiB"


class TestAuditTrail:
    """Every mutation attempt: one JSON line in the file, one printable line on the log."""

    def test_every_attempt_is_recorded(self, stack: AdminStack, audit_file: Path) -> None:
        """ok, 401, 403, 400, 404, 409 and 413 attempts each write one record with the
        status and reason; reads write none; the file is its owner's alone."""
        before = len(records(audit_file)) if audit_file.exists() else 0
        with stack.client() as ops, stack.client(stack.viewer_token) as viewer:
            (worker,) = [w["id"] for w in ops.get("/api/workers").json()["workers"]]
            attempts = [
                (ops.post("/api/freeze_gc"), 200),
                (httpx.post(f"{stack.admin_url}/api/freeze_gc", trust_env=False), 401),
                (viewer.post(f"/api/workers/{worker}/drain"), 403),
                (ops.post("/api/pause", json={"mode": "sideways"}), 400),
                (ops.post("/api/workers/w-ghost/drain"), 404),
                (ops.post(f"/api/workers/{worker}/undrain"), 409),
                (ops.post("/api/continue", content=b"x" * (2 * 1024 * 1024)), 413),
            ]
            ops.get("/api/status").raise_for_status()
            viewer.get("/api/workers").raise_for_status()
        assert [answer.status_code for answer, _ in attempts] == [s for _, s in attempts]
        found = new_records(audit_file, before, len(attempts))
        summary = [(r["who"], r["action"], r["result"], r["status"], r["reason"]) for r in found]
        assert summary == [
            ("ops", "freeze_gc", "ok", 200, None),
            (None, "freeze_gc", "refused", 401, "unauthorized"),
            ("viewer", "drain", "refused", 403, "forbidden"),
            ("ops", "pause", "refused", 400, "bad_request"),
            ("ops", "drain", "refused", 404, "not_found"),
            ("ops", "undrain", "refused", 409, "conflict"),
            ("ops", "continue", "refused", 413, "body_too_large"),
        ]
        assert found[0]["detail"].startswith("frozen=") and found[4]["target"] == "w-ghost"
        assert all(r["client"].startswith("127.0.0.1:") for r in found)
        assert stat.S_IMODE(audit_file.stat().st_mode) == 0o600
        lines = [line for line in stack.stderr().splitlines() if "switchboard.audit" in line]
        assert any(
            "audit who=- action=freeze_gc target=all result=refused status=401 "
            "reason=unauthorized " in line
            for line in lines
        ), lines[-10:]

    def test_a_barrier_records_its_account(self, stack: AdminStack, audit_file: Path) -> None:
        """A pause and a continue record the mode, the operation and who acknowledged."""
        before = len(records(audit_file)) if audit_file.exists() else 0
        with stack.client() as ops:
            paused = ops.post("/api/pause", json={"mode": "in_place", "timeout_s": 5})
            resumed = ops.post("/api/continue", json={"timeout_s": 5})
        assert (paused.status_code, resumed.status_code) == (200, 200), paused.text
        pause, resume = new_records(audit_file, before, 2)
        op = paused.json()["op_id"]
        assert pause["action"] == "pause" and pause["result"] == "ok"
        assert re.fullmatch(rf"mode=in_place op={op} acked=\S*engine\S*", pause["detail"])
        assert resume["detail"].startswith(f"op={resumed.json()['op_id']} acked=")

    def test_a_forwarded_for_header_is_not_the_client(
        self, stack: AdminStack, audit_file: Path
    ) -> None:
        """A local client's X-Forwarded-For does not replace the address the audit records
        (uvicorn would believe it from 127.0.0.1 by default)."""
        before = len(records(audit_file)) if audit_file.exists() else 0
        forged = {"X-Forwarded-For": "192.0.2.7", "Forwarded": "for=192.0.2.7"}
        with stack.client() as ops:
            assert ops.post("/api/freeze_gc", headers=forged).status_code == 200
        (record,) = new_records(audit_file, before, 1)
        assert record["client"].startswith("127.0.0.1:"), record

    def test_a_forged_target_stays_on_its_line(self, stack: AdminStack, audit_file: Path) -> None:
        """A worker id holding a newline, a fake record and ESC: exact in the file,
        escaped on one log line, and no log line is forged or holds an ESC."""
        before = len(records(audit_file)) if audit_file.exists() else 0
        forged = "w0\naudit who=root action=pause target=all result=ok\x1b[2K\x1b[1A"
        path = f"/api/workers/{quote(forged, safe='')}/drain"
        with stack.client() as ops:
            assert ops.post(path).status_code == 404
        (record,) = new_records(audit_file, before, 1)
        assert record["target"] == forged

        def escaped() -> list[str]:
            # The admin app's line; the router audits the refused drain too (via=control,
            # the id in its args), escaped alike.
            lines = stack.stderr().splitlines()
            return [line for line in lines if "result=ok\\x1b" in line and "via=" not in line]

        (line,) = wait_until(escaped, 10.0, "the escaped audit line")
        assert 'target="w0\\naudit who=root action=pause target=all result=ok\\x1b[2K' in line
        log = stack.stderr()
        assert "\x1b" not in log
        assert not any(line.startswith("audit who=root") for line in log.splitlines())


class TestSecurityHeaders:
    """The real admin process: the console's CSP on its responses, frame denial on all."""

    @pytest.mark.parametrize(
        ("path", "policy"),
        [
            ("/", CONSOLE_CSP),
            ("/static/index.html", CONSOLE_CSP),
            ("/static/console.js", CONSOLE_CSP),
            ("/api/status", API_CSP),
            ("/healthz", API_CSP),
        ],
    )
    def test_headers(self, stack: AdminStack, path: str, policy: str) -> None:
        """Each response: its CSP, X-Frame-Options DENY, nosniff, no referrer."""
        with stack.client() as client:
            answer = client.get(path)
        assert answer.status_code == 200
        assert answer.headers["content-security-policy"] == policy
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"


class TestConsoleUnderItsPolicy:
    """In Chromium: the console runs under its CSP and refuses to be framed."""

    def test_console_runs_and_cannot_be_framed(self, browser: Browser, stack: AdminStack) -> None:
        """The console connects live with no page error (a CSP violation is one); a page
        framing it gets no console in the frame, and Chromium says why."""
        from playwright.sync_api import expect

        with console_page(browser, stack, stack.operator_token) as (page, problems):
            expect(page.get_by_test_id("connection")).to_have_attribute(
                "data-connection", "live", timeout=UI_TIMEOUT_MS
            )
            assert problems.errors == []
            framing = browser.new_page()
            refusals: list[str] = []
            framing.on("console", lambda message: refusals.append(message.text))
            try:
                framing.set_content(f'<iframe id="framed" src="{stack.admin_url}/"></iframe>')
                wait_until(
                    lambda: any("frame" in text and "'none'" in text for text in refusals),
                    10.0,
                    lambda: f"Chromium's refusal to frame the console, got {refusals}",
                )
                framed = framing.frame_locator("#framed")
                expect(framed.get_by_test_id("connection")).to_have_count(0)
            finally:
                framing.close()


def run_dir_with_key(tmp_path: Path) -> Path:
    """``tmp_path`` holding a stack key, as a stack's run dir does."""
    load_or_create(tmp_path / KEY_FILE)
    return tmp_path


def run_admin(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in child_env().items() if not k.startswith("SWITCHBOARD_ADMIN_")}
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "admin", *arguments],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**clean, **env},
        timeout=60,
        check=False,
    )


class TestAdminCommandRefusals:
    """``switchboard admin`` refuses, in one line and exit 2, what hardening forbids."""

    @pytest.mark.parametrize(
        "where", [("--allow-remote",), ("--host", "0.0.0.0", "--allow-remote")]
    )
    def test_short_token_when_exposed(self, tmp_path: Path, where: tuple[str, ...]) -> None:
        """A 5-character operator token with --allow-remote: refused, naming the variable
        and the entry, never the token."""
        env = {"SWITCHBOARD_ADMIN_OPERATOR_TOKENS": "a:short"}
        result = run_admin(env, "--run-dir", str(run_dir_with_key(tmp_path)), *where)
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert "SWITCHBOARD_ADMIN_OPERATOR_TOKENS: the token of 'a' is shorter than 24" in line
        assert "short" not in line.replace("shorter", "")

    def test_unusable_audit_log(self, tmp_path: Path) -> None:
        """An audit file in a directory that does not exist: refused before serving."""
        missing = tmp_path / "no-such-dir" / "audit.jsonl"
        arguments = ("--run-dir", str(run_dir_with_key(tmp_path)), "--port", str(free_port()))
        result = run_admin({}, *arguments, "--audit-log", str(missing))
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert f"cannot open the audit log {missing}" in line
