"""The admin API as an operator first meets it, against a real ``switchboard up`` with an
audit file (issue 13): curl's ``-d`` (a form content type) pauses as docs/operations.md
section 4 shows, a broken body says what is wrong and where, every refused mutation
writes one audit record (400s of every kind, 401, 403, 404, 409), a wrong method and an
unknown path answer in the one error shape, and the workers stay in id order after one
of them restarts.

One stack serves the module; tests leave it serving and unpaused.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import REPO_ROOT, child_env, wait_until
from tests.integration.harness.admin_stack import AdminStack
from tests.integration.test_admin_hardening import new_records, records

pytestmark = pytest.mark.integration

#: docs/operations.md section 4, as written there (the port is the stack's).
DOCS_PAUSE = (
    'curl -s -H "Authorization: Bearer $T" localhost:{port}/api/pause '
    '-d \'{{"mode": "in_place", "timeout_s": 5}}\''
)
#: What a body that would do looks like, as a refused pause's message ends.
PAUSE_EXAMPLE = 'send a JSON object, such as {"mode":"abort","timeout_s":5.0}'


@pytest.fixture(scope="module")
def stack(audited_stack: AdminStack) -> AdminStack:
    """Two workers, the admin app and its audit file (conftest's ``audited_stack``)."""
    return audited_stack


@pytest.fixture
def ops(stack: AdminStack) -> Iterator[httpx.Client]:
    with stack.client() as client:
        yield client


def curl(stack: AdminStack, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` run by a shell with ``$T`` the operator's token, as an operator would."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    env = {name: value for name, value in child_env().items() if "proxy" not in name.lower()}
    return subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        env={**env, "T": stack.operator_token},
        timeout=60,
        check=False,
    )


def port_of(stack: AdminStack) -> int:
    port = httpx.URL(stack.admin_url).port
    assert port is not None
    return port


def error(answer: httpx.Response) -> tuple[str, str]:
    """``(code, message)`` of an answer in the admin API's one error shape."""
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return body["error"]["code"], body["error"]["message"]


def count(audit_file: Path) -> int:
    return len(records(audit_file)) if audit_file.exists() else 0


class TestCurlAsTheDocsWriteIt:
    """curl with ``-d`` alone sends ``application/x-www-form-urlencoded``."""

    def test_the_docs_pause_then_continue(self, stack: AdminStack, ops: httpx.Client) -> None:
        """docs/operations.md section 4's pause, run by curl as written: the pause is
        done (every participant acknowledged, mode in_place); so is a continue sent the
        same way."""
        paused = curl(stack, DOCS_PAUSE.format(port=port_of(stack)))
        assert paused.returncode == 0, paused.stderr
        operation = json.loads(paused.stdout)
        assert (operation["action"], operation["mode"], operation["complete"]) == (
            "pause",
            "in_place",
            True,
        ), operation
        assert set(operation["acked"]) == {"engine", "w0", "w1"}
        assert ops.get("/api/status").json()["pause_mode"] == "in_place"
        resume = (
            f'curl -s -H "Authorization: Bearer $T" localhost:{port_of(stack)}/api/continue '
            "-d '{\"timeout_s\": 5}'"
        )
        resumed = curl(stack, resume)
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["complete"] is True
        assert ops.get("/api/status").json()["paused"] is False

    def test_broken_json_says_where(self, stack: AdminStack) -> None:
        """With the JSON header and a trailing comma: 400 naming it and its byte."""
        command = (
            f'curl -s -w "\\n%{{http_code}}" -H "Authorization: Bearer $T" '
            f"-H 'Content-Type: application/json' localhost:{port_of(stack)}/api/pause "
            '-d \'{"mode": "abort",}\''
        )
        result = curl(stack, command)
        body, status = result.stdout.rsplit("\n", 1)
        assert status == "400", result.stdout
        assert json.loads(body)["error"] == {
            "code": "bad_request",
            "message": "the body is not valid JSON: trailing comma in object at byte 17; "
            + PAUSE_EXAMPLE,
        }


class TestEveryRefusalIsAudited:
    """docs/operations.md section 8: every mutation attempt, refused or not, is a record."""

    def test_refused_mutations(
        self, stack: AdminStack, ops: httpx.Client, audit_file: Path
    ) -> None:
        """Pauses refused 400 (bad mode, bad timeout, broken JSON, a real form), 401 and
        403, a drain of an unknown worker (404) and an undrain of a serving one (409):
        each answered with its message and written as one refused record carrying it."""
        url = stack.admin_url
        json_type = {"Content-Type": "application/json"}
        before = count(audit_file)
        with stack.client(stack.viewer_token) as viewer:
            attempts = [
                (ops.post("/api/pause", json={"mode": "sideways"}), 400),
                (ops.post("/api/pause", json={"mode": "abort", "timeout_s": 0}), 400),
                (ops.post("/api/continue", json={"timeout_s": "5"}), 400),
                (ops.post("/api/pause", content=b'{"mode": ', headers=json_type), 400),
                (ops.post("/api/pause", data={"mode": "in_place"}), 400),
                (ops.post("/pause_generation", json=[1]), 400),
                (httpx.post(f"{url}/api/pause", json={"mode": "abort"}, trust_env=False), 401),
                (viewer.post("/api/pause", json={"mode": "abort"}), 403),
                (ops.post("/api/workers/w-ghost/drain"), 404),
                (ops.post("/api/workers/w0/undrain"), 409),
            ]
        statuses = [answer.status_code for answer, _ in attempts]
        assert statuses == [status for _, status in attempts], [a.text for a, _ in attempts]
        messages = [error(answer)[1] for answer, _ in attempts]
        assert messages[:6] == [
            "mode: should be 'abort', 'retract' or 'in_place', not the string \"sideways\"",
            "timeout_s: should be greater than 0, not 0",
            'timeout_s: should be a number, not the string "5"',
            "the body is not valid JSON: it ends at byte 9, before the JSON value does; "
            + PAUSE_EXAMPLE,
            "the body is not valid JSON: invalid character at byte 0; " + PAUSE_EXAMPLE,
            "the body should be a JSON object, not an array; " + PAUSE_EXAMPLE,
        ]
        found = new_records(audit_file, before, len(attempts))
        summary = [(r["who"], r["action"], r["target"], r["status"], r["reason"]) for r in found]
        assert summary == [
            ("ops", "pause", "all", 400, "bad_request"),
            ("ops", "pause", "all", 400, "bad_request"),
            ("ops", "continue", "all", 400, "bad_request"),
            ("ops", "pause", "all", 400, "bad_request"),
            ("ops", "pause", "all", 400, "bad_request"),
            ("ops", "pause", "all", 400, "bad_request"),
            (None, "pause", "all", 401, "unauthorized"),
            ("viewer", "pause", "all", 403, "forbidden"),
            ("ops", "drain", "w-ghost", 404, "not_found"),
            ("ops", "undrain", "w0", 409, "conflict"),
        ]
        assert all(record["result"] == "refused" for record in found)
        assert [record["detail"] for record in found] == messages
        lines = [line for line in stack.stderr().splitlines() if "switchboard.audit" in line]
        assert any(
            "who=ops action=pause target=all result=refused status=400 reason=bad_request "
            'detail="the body is not valid JSON: invalid character at byte 0;' in line
            for line in lines
        ), lines[-12:]


class TestHttpErrors:
    """Starlette's own refusals in the one error shape, and not audited."""

    def test_wrong_method_and_unknown_path(
        self, stack: AdminStack, ops: httpx.Client, audit_file: Path
    ) -> None:
        """GET /api/pause is 405 with ``Allow: POST``, /api/nope 404, each naming what was
        asked; neither writes a record (a freeze GC after them is the next one)."""
        before = count(audit_file)
        wrong = ops.get("/api/pause")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
        assert error(wrong) == (
            "method_not_allowed",
            "GET is not allowed on /api/pause; it takes POST",
        )
        unknown = ops.post("/api/nope", json={})
        assert unknown.status_code == 404
        assert error(unknown) == ("not_found", "no path /api/nope")
        ops.post("/api/freeze_gc").raise_for_status()
        (record,) = new_records(audit_file, before, 1)
        assert record["action"] == "freeze_gc"

    def test_the_workers_answer_a_wrong_method_in_their_shape(self, stack: AdminStack) -> None:
        """docs/http-api.md: a worker answers GET /generate 405 with ``Allow: POST`` and an
        unknown path 404, in the workers' error shape, each naming what was asked."""
        with httpx.Client(base_url=stack.base_url, trust_env=False, timeout=10.0) as client:
            wrong, unknown = client.get("/generate"), client.get("/nope")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
        assert wrong.json() == {
            "error": {
                "message": "GET is not allowed on /generate; it takes POST",
                "type": "invalid_request_error",
                "param": None,
                "code": 405,
            }
        }
        assert unknown.status_code == 404
        assert unknown.json()["error"] == {
            "message": "no path /nope",
            "type": "invalid_request_error",
            "param": None,
            "code": 404,
        }


def router_order(stack: AdminStack) -> list[str]:
    """The ids ``list_workers`` gives, in the router's own order."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "switchboard.cli", "ctl"),
            *("--run-dir", str(stack.run_dir), "list_workers", "include_departed=true"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=child_env(),
        timeout=60,
        check=True,
    )
    reply: Any = json.loads(result.stdout)
    views = reply["workers"] if isinstance(reply, dict) else reply
    return [view["id"] for view in views]


class TestWorkerOrder:
    """``GET /api/workers`` lists workers by id, before and after a restart."""

    def test_order_survives_a_restart(self, stack: AdminStack, ops: httpx.Client) -> None:
        """w0 stopped until the router declares it dead, then killed: the supervisor
        restarts it and it registers again, after w1 in the router's own order; the API
        (and the event stream's snapshot) still list w0, w1."""
        assert [w["id"] for w in ops.get("/api/workers").json()["workers"]] == ["w0", "w1"]
        old_pid = ops.get("/api/workers/w0").json()["pid"]
        os.kill(old_pid, signal.SIGSTOP)
        try:
            # A worker that comes back before the router gives it up keeps its place.
            wait_until(
                lambda: ops.get("/api/workers/w0").json()["state"] == "dead",
                30.0,
                "the router to declare the stopped w0 dead",
            )
        finally:
            os.kill(old_pid, signal.SIGKILL)

        def restarted() -> bool:
            seen = ops.get("/api/workers/w0").json()
            return bool(seen["pid"] != old_pid and seen["state"] == "serving")

        wait_until(restarted, 60.0, "w0 restarted and serving")
        assert router_order(stack) == ["w1", "w0"], "the router keeps a restarted worker's place"
        listed = ops.get("/api/workers").json()["workers"]
        assert [w["id"] for w in listed] == ["w0", "w1"]
        with ops.stream("GET", "/api/events") as events:
            for line in events.iter_lines():
                if line.startswith("data: "):
                    snapshot = json.loads(line.removeprefix("data: "))
                    break
        assert [w["id"] for w in snapshot["workers"]] == ["w0", "w1"]
