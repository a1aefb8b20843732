"""The admin API against a real stack (``switchboard up``): auth, every endpoint, the pause
barrier's 200 and 504 answers, drain, the event stream, the audit log, and the
``switchboard admin`` command's refusals and stop.

One stack serves the whole module (tests leave it serving and unpaused); a second,
smaller one with no token configured checks the generated console URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import REPO_ROOT, child_env, wait_until
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.http_stack import free_port

pytestmark = pytest.mark.integration

#: Every mutation: method, path and body.
MUTATIONS = [
    ("POST", "/api/pause", {"mode": "abort", "timeout_s": 2}),
    ("POST", "/api/continue", {}),
    ("POST", "/pause_generation", {}),
    ("POST", "/continue_generation", None),
    ("POST", "/api/workers/w0/drain", None),
    ("POST", "/api/workers/w0/undrain", None),
    ("POST", "/api/freeze_gc", None),
]
READS = ["/api/workers", "/api/workers/w0", "/api/status", "/api/load"]
#: An event reaches a subscriber within this long of the change (poll 0.25 s + margin).
EVENT_DEADLINE_S = 1.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """One stack for the module: 2 workers, the admin app, an operator and a viewer token."""
    with admin_stack(tmp_path_factory) as running:
        yield running


@pytest.fixture
def ops(stack: AdminStack) -> Iterator[httpx.Client]:
    """A client sending the operator's token."""
    with stack.client() as client:
        yield client


@pytest.fixture
def viewer(stack: AdminStack) -> Iterator[httpx.Client]:
    """A client sending the viewer's token."""
    with stack.client(stack.viewer_token) as client:
        yield client


def error_code(response: httpx.Response) -> str:
    """The ``error.code`` of a JSON error body (fails on any other shape)."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return str(body["error"]["code"])


def worker(client: httpx.Client, worker_id: str) -> dict[str, Any]:
    reply = client.get(f"/api/workers/{worker_id}")
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def wait_worker(client: httpx.Client, worker_id: str, **expected: Any) -> dict[str, Any]:
    """Poll ``GET /api/workers/{id}`` until every ``expected`` field has its value."""

    def reached() -> dict[str, Any] | None:
        seen = worker(client, worker_id)
        return seen if all(seen[key] == value for key, value in expected.items()) else None

    return wait_until(reached, 15.0, lambda: f"{worker_id} {expected}: {worker(client, worker_id)}")


class TestAuth:
    """Bearer tokens: viewers read, operators also mutate; errors are JSON."""

    @pytest.mark.parametrize("path", [*READS, "/api/events"])
    def test_reads_need_a_token(self, stack: AdminStack, path: str) -> None:
        """No token and an unknown token are both 401 ``unauthorized`` with a challenge."""
        with stack.client("") as anonymous:
            anonymous.headers.pop("Authorization", None)
            reply = anonymous.get(path)
            assert reply.status_code == 401 and error_code(reply) == "unauthorized"
            assert reply.headers["www-authenticate"] == "Bearer"
        with stack.client("not-a-token") as stranger:
            reply = stranger.get(path)
            assert reply.status_code == 401 and error_code(reply) == "unauthorized"

    @pytest.mark.parametrize("path", READS)
    def test_viewer_reads(self, viewer: httpx.Client, path: str) -> None:
        """A viewer's token reads every resource."""
        assert viewer.get(path).status_code == 200

    @pytest.mark.parametrize(("method", "path", "body"), MUTATIONS)
    def test_viewer_cannot_mutate(
        self, viewer: httpx.Client, method: str, path: str, body: Any
    ) -> None:
        """A viewer's token on any mutation is 403 ``forbidden`` (and changes nothing)."""
        reply = viewer.request(method, path, json=body)
        assert reply.status_code == 403 and error_code(reply) == "forbidden"

    @pytest.mark.parametrize(("method", "path", "body"), MUTATIONS)
    def test_mutations_need_a_token(
        self, stack: AdminStack, method: str, path: str, body: Any
    ) -> None:
        """No token on a mutation is 401."""
        reply = httpx.request(method, stack.admin_url + path, json=body, trust_env=False)
        assert reply.status_code == 401 and error_code(reply) == "unauthorized"

    def test_whoami_names_the_token_and_its_role(
        self, stack: AdminStack, viewer: httpx.Client
    ) -> None:
        """/api/whoami tells a client its token's name and role, so it can offer only
        the actions that role allows."""
        assert viewer.get("/api/whoami").json() == {"name": "viewer", "role": "viewer"}
        with stack.client(stack.operator_token) as operator:
            assert operator.get("/api/whoami").json()["role"] == "operator"

    def test_basic_auth_is_not_a_bearer_token(self, stack: AdminStack) -> None:
        """Another scheme carrying a valid token is still 401."""
        headers = {"Authorization": f"Basic {stack.operator_token}"}
        reply = httpx.get(f"{stack.admin_url}/api/status", headers=headers, trust_env=False)
        assert reply.status_code == 401

    @pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json"])
    def test_open_endpoints(self, stack: AdminStack, path: str) -> None:
        """Health, readiness and the API description need no token."""
        assert httpx.get(stack.admin_url + path, trust_env=False).status_code == 200

    def test_no_docs_page_pulls_script_from_a_cdn(self, stack: AdminStack) -> None:
        """There is no /docs page: Swagger UI from a CDN would run on the console's
        origin, where it could read the console's token."""
        assert httpx.get(stack.admin_url + "/docs", trust_env=False).status_code == 404

    def test_unknown_path_is_a_json_404(self, ops: httpx.Client) -> None:
        """Even a path that does not exist answers the JSON error shape."""
        reply = ops.get("/api/nothing-here")
        assert reply.status_code == 404 and error_code(reply) == "not_found"


class TestReads:
    """Workers, status, load, health and the schema."""

    def test_workers(self, ops: httpx.Client) -> None:
        """Both workers are listed serving, with every documented field."""
        workers = {item["id"]: item for item in ops.get("/api/workers").json()["workers"]}
        assert {"w0", "w1"} <= set(workers)
        for worker_id in ("w0", "w1"):
            item = workers[worker_id]
            assert item["state"] == "serving" and item["departure_reason"] is None
            assert item["endpoint"].endswith(f"worker-{worker_id}")
            assert item["pid"] > 0 and item["version"] and item["host"]
            assert item["registered_at"] <= item["last_heartbeat_at"] <= time.time() + 1
            assert item["last_heartbeat_s_ago"] < 5 and item["safe_to_delete"] is False

    def test_one_worker_and_an_unknown_one(self, ops: httpx.Client) -> None:
        """``GET /api/workers/{id}`` gives the worker; an unknown id is 404 ``not_found``."""
        assert worker(ops, "w1")["id"] == "w1"
        reply = ops.get("/api/workers/w-nobody")
        assert reply.status_code == 404 and error_code(reply) == "not_found"
        assert "w-nobody" in reply.json()["error"]["message"]

    def test_status(self, ops: httpx.Client) -> None:
        """Status: not paused, the engine live with its load, worker counts, versions."""
        status = ops.get("/api/status").json()
        assert status["paused"] is False and status["engine"]["live"] is True
        assert status["engine"]["load"]["max_running"] == 256
        assert status["workers"].get("serving") == 2
        assert status["versions"]["admin"] == status["versions"]["router"] != ""
        assert status["router"]["pid"] > 0 and status["router"]["uptime_s"] > 0
        assert status["pause_state_since"] <= time.time()

    def test_load(self, ops: httpx.Client) -> None:
        """``GET /api/load`` has the engine's latest snapshot."""
        load = ops.get("/api/load").json()["load"]
        assert load["max_running"] == 256 and load["running"] >= 0 and load["age_s"] < 5

    def test_health_and_readiness(self, stack: AdminStack) -> None:
        """``/healthz`` says ok; ``/readyz`` sees the router and the engine."""
        assert httpx.get(f"{stack.admin_url}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{stack.admin_url}/readyz").json() == {"router": True, "engine": True}

    def test_schema_is_complete(self, stack: AdminStack) -> None:
        """Every API operation documents its answers with schemas; none documents a 422."""
        schema = httpx.get(f"{stack.admin_url}/openapi.json").json()
        paths = schema["paths"]
        for path in ("/api/workers", "/api/status", "/api/pause", "/pause_generation"):
            assert path in paths
        for path, operations in paths.items():
            for method, operation in operations.items():
                responses = operation["responses"]
                assert "422" not in responses, (method, path)
                if path.startswith("/api/"):
                    assert "401" in responses, (method, path)
                    content = responses["200"]["content"]
                    assert any("schema" in media for media in content.values()), (method, path)
        assert "HTTPBearer" in schema["components"]["securitySchemes"]


class TestPause:
    """The barrier from HTTP: 200 with every acknowledgement, 504 naming stragglers."""

    def test_pause_in_place_then_continue(self, ops: httpx.Client) -> None:
        """Every worker and the engine acknowledge; status shows the pause, then its end."""
        before = time.time()
        reply = ops.post("/api/pause", json={"mode": "in_place", "timeout_s": 5})
        assert reply.status_code == 200, reply.text
        operation = reply.json()
        assert operation["action"] == "pause" and operation["mode"] == "in_place"
        assert operation["complete"] and operation["stragglers"] == []
        assert set(operation["acked"]) == {"engine", "w0", "w1"}
        status = ops.get("/api/status").json()
        assert status["paused"] is True and status["pause_mode"] == "in_place"
        assert status["pause_state_since"] >= before - 1
        assert status["recent_operations"][-1]["op_id"] == operation["op_id"]
        wait_worker(ops, "w0", state="paused")

        reply = ops.post("/api/continue", json={"timeout_s": 5})
        assert reply.status_code == 200, reply.text
        resumed = reply.json()
        assert resumed["action"] == "continue" and resumed["complete"]
        assert set(resumed["acked"]) == {"engine", "w0", "w1"}
        status = ops.get("/api/status").json()
        assert (
            status["paused"] is False
            and status["recent_operations"][-1]["seq"] > (operation["seq"])
        )

    def test_sglang_aliases(self, ops: httpx.Client) -> None:
        """``/pause_generation`` (default abort; no body needed) and ``/continue_generation``."""
        paused = ops.post("/pause_generation")
        assert paused.status_code == 200, paused.text
        assert paused.json()["action"] == "pause" and paused.json()["mode"] == "abort"
        retract = ops.post("/pause_generation", json={"mode": "retract"})
        assert retract.status_code == 200 and retract.json()["mode"] == "retract"
        resumed = ops.post("/continue_generation", content=b"")
        assert resumed.status_code == 200 and resumed.json()["action"] == "continue"
        assert ops.get("/api/status").json()["paused"] is False

    @pytest.mark.parametrize(
        "body",
        [
            {"mode": "sideways"},
            {"timeout_s": 0},
            {"timeout_s": 601},
            {"mode": "abort", "surprise": 1},
            [1, 2],
        ],
    )
    def test_bad_bodies_are_400(self, ops: httpx.Client, body: Any) -> None:
        """A mode that does not exist, a timeout out of (0, 600] or junk is 400."""
        reply = ops.post("/api/pause", json=body)
        assert reply.status_code == 400 and error_code(reply) == "bad_request"

    def test_broken_json_is_400(self, ops: httpx.Client) -> None:
        """A body that is not JSON is 400 ``bad_request``."""
        headers = {"Content-Type": "application/json"}
        reply = ops.post("/api/continue", content=b"{not json", headers=headers)
        assert reply.status_code == 400 and error_code(reply) == "bad_request"

    def test_stopped_worker_is_a_named_straggler(self, ops: httpx.Client) -> None:
        """A worker that cannot acknowledge (SIGSTOPped) makes a pause 504, naming it."""
        pid = worker(ops, "w1")["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            reply = ops.post("/api/pause", json={"mode": "abort", "timeout_s": 1})
        finally:
            os.kill(pid, signal.SIGCONT)
        assert reply.status_code == 504, reply.text
        body = reply.json()
        assert body["complete"] is False and body["stragglers"] == ["w1"]
        assert set(body["acked"]) == {"engine", "w0"}
        assert body["error"]["code"] == "timeout" and "w1" in body["error"]["message"]
        recent = ops.get("/api/status").json()["recent_operations"][-1]
        assert recent["op_id"] == body["op_id"] and recent["stragglers"] == ["w1"]

        reply = ops.post("/api/continue", json={"timeout_s": 10})
        assert reply.status_code == 200, reply.text
        assert set(reply.json()["acked"]) == {"engine", "w0", "w1"}
        wait_worker(ops, "w1", state="serving")


class TestDrain:
    """Draining one worker from HTTP, and the 404/409 answers."""

    def test_drain_until_safe_then_undrain(self, ops: httpx.Client) -> None:
        """A drained idle worker reaches ``drained`` with ``safe_to_delete``; undrain serves."""
        reply = ops.post("/api/workers/w1/drain")
        assert reply.status_code == 200, reply.text
        assert reply.json()["id"] == "w1" and reply.json()["state"] in ("draining", "drained")
        wait_worker(ops, "w1", state="drained", safe_to_delete=True, inflight=0)

        again = ops.post("/api/workers/w1/drain")  # idempotent: it stays drained
        assert again.status_code == 200 and again.json()["state"] == "drained"

        reply = ops.post("/api/workers/w1/undrain")
        assert reply.status_code == 200, reply.text
        wait_worker(ops, "w1", state="serving", safe_to_delete=False)

    def test_undrain_a_serving_worker_is_409(self, ops: httpx.Client) -> None:
        """Undrain applies only to a draining or drained worker."""
        reply = ops.post("/api/workers/w0/undrain")
        assert reply.status_code == 409 and error_code(reply) == "conflict"
        assert "w0" in reply.json()["error"]["message"]

    @pytest.mark.parametrize("action", ["drain", "undrain"])
    def test_unknown_worker_is_404(self, ops: httpx.Client, action: str) -> None:
        """Draining or undraining an id the router does not know is 404."""
        reply = ops.post(f"/api/workers/w-nobody/{action}")
        assert reply.status_code == 404 and error_code(reply) == "not_found"

    def test_freeze_gc(self, ops: httpx.Client) -> None:
        """freeze_gc reports the router frozen and the engine asked."""
        reply = ops.post("/api/freeze_gc")
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"frozen": ["tokenizer_router"], "forwarded_to": ["engine"]}


@dataclass
class EventReader:
    """Events read from one ``/api/events`` stream, each with its arrival time."""

    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self, response: httpx.Response) -> None:
        kind, data = "", ""
        async for line in response.aiter_lines():
            if line.startswith(":"):
                self.comments.append(line)
            elif line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = line.removeprefix("data: ")
            elif line == "" and kind:
                self.events.append((time.monotonic(), kind, json.loads(data)))
                kind, data = "", ""
                self.arrived.set()

    async def wait_for(self, after: float, kind: str, match: Any, deadline_s: float) -> float:
        """Seconds from ``after`` (monotonic) to the first ``kind`` event after it for which
        ``match(data)`` holds; fails after waiting ``deadline_s``."""
        limit = time.monotonic() + deadline_s
        while True:
            for arrived, seen, data in self.events:
                if arrived >= after and seen == kind and match(data):
                    return arrived - after
            remaining = limit - time.monotonic()
            if remaining <= 0:
                recent = [(seen, data) for arrived, seen, data in self.events if arrived >= after]
                raise AssertionError(f"no matching {kind} event in {deadline_s} s; saw {recent}")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), remaining)


@contextlib.asynccontextmanager
async def event_stream(client: httpx.AsyncClient) -> AsyncIterator[EventReader]:
    """Read ``/api/events`` in the background while the body runs."""
    reader = EventReader()
    async with client.stream("GET", "/api/events") as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        task = asyncio.create_task(reader.read(response))
        try:
            yield reader
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await task


class TestEvents:
    """``/api/events``: a snapshot, then worker and pause events within a second."""

    def test_snapshot_then_drain_and_pause_events(self, stack: AdminStack) -> None:
        """A viewer's stream opens with a snapshot; a drain and a pause each arrive as an
        event within a second of the operator's call returning."""

        async def scenario() -> tuple[float, float, float]:
            async with (
                stack.async_client(stack.viewer_token) as watcher,
                stack.async_client() as operator,
                event_stream(watcher) as reader,
            ):
                await reader.wait_for(0.0, "snapshot", lambda data: True, 5.0)
                _, kind, snapshot = reader.events[0]
                assert kind == "snapshot"
                assert {item["id"] for item in snapshot["workers"]} >= {"w0", "w1"}
                assert snapshot["status"]["paused"] is False

                sent = time.monotonic()
                (await operator.post("/api/workers/w0/drain")).raise_for_status()
                drain_s = await reader.wait_for(
                    sent,
                    "worker",
                    lambda data: (
                        data["worker"]["id"] == "w0"
                        and data["worker"]["state"] in ("draining", "drained")
                        and data["change"] == "state"
                    ),
                    EVENT_DEADLINE_S,
                )
                sent = time.monotonic()
                (await operator.post("/api/workers/w0/undrain")).raise_for_status()
                await reader.wait_for(
                    sent,
                    "worker",
                    lambda data: (
                        data["worker"]["id"] == "w0" and data["worker"]["state"] == "serving"
                    ),
                    5.0,
                )

                sent = time.monotonic()
                body = {"mode": "retract", "timeout_s": 5}
                (await operator.post("/api/pause", json=body)).raise_for_status()
                pause_s = await reader.wait_for(
                    sent,
                    "pause",
                    lambda data: (
                        data["status"]["paused"] and data["status"]["pause_mode"] == "retract"
                    ),
                    EVENT_DEADLINE_S,
                )
                sent = time.monotonic()
                (await operator.post("/api/continue")).raise_for_status()
                continue_s = await reader.wait_for(
                    sent, "pause", lambda data: not data["status"]["paused"], EVENT_DEADLINE_S
                )
                return drain_s, pause_s, continue_s

        drain_s, pause_s, continue_s = asyncio.run(scenario())
        assert max(drain_s, pause_s, continue_s) < EVENT_DEADLINE_S

    def test_load_events_follow_generation(self, stack: AdminStack) -> None:
        """Requests running in the engine show up as ``load`` events."""

        async def scenario() -> list[dict[str, Any]]:
            async with (
                stack.async_client() as admin,
                httpx.AsyncClient(base_url=stack.base_url, timeout=30, trust_env=False) as http,
                event_stream(admin) as reader,
            ):
                body = {"text": "load me", "sampling_params": {"max_new_tokens": 200}}
                replies = [http.post("/generate", json=body) for _ in range(4)]
                generation = asyncio.gather(*replies)
                await reader.wait_for(
                    time.monotonic(), "load", lambda data: data["load"]["running"] > 0, 5.0
                )
                await generation
                return [data for _, kind, data in reader.events if kind == "load"]

        loads = asyncio.run(scenario())
        assert any(item["load"]["running"] > 0 for item in loads)


class TestAuditLog:
    """Mutations are audited by token name; token values never reach a log."""

    def test_mutations_are_audited_by_name(self, stack: AdminStack, ops: httpx.Client) -> None:
        """Each mutation writes one ``switchboard.audit`` line naming ``ops`` and the result."""
        ops.post("/api/freeze_gc").raise_for_status()
        assert ops.post("/api/workers/w-ghost/drain").status_code == 404

        def audited() -> list[str]:
            lines = [line for line in stack.stderr().splitlines() if "switchboard.audit" in line]
            wanted = ("action=freeze_gc target=all result=ok", "action=drain target=w-ghost")
            return lines if all(any(w in line for line in lines) for w in wanted) else []

        lines = wait_until(audited, 5.0, "the audit lines")
        for line in lines:
            assert re.search(
                r"audit who=\S+ action=\S+ target=\S+ result=(ok|timeout|error) ", line
            )
        assert any("action=drain target=w-ghost result=error" in line for line in lines)
        assert all("who=ops " in line for line in lines)

    def test_tokens_are_never_logged(self, stack: AdminStack) -> None:
        """Neither token appears in any process's log or on stdout; the console URL does."""
        log = stack.stderr()
        assert stack.operator_token not in log and stack.viewer_token not in log
        assert stack.operator_token not in stack.serving_line
        assert f"console {stack.admin_url}/;" in stack.serving_line


def test_generated_token_is_in_the_console_url(
    stack: AdminStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With no token configured, the serving line's console URL carries a generated
    operator token that the admin app accepts, and no log line holds it."""
    # The module's stack keeps serving meanwhile: two stacks on free ports at once.
    arguments = ("--detokenizers", "1")
    with admin_stack(
        tmp_path_factory, workers=1, extra_args=arguments, configure_tokens=False
    ) as bare:
        match = re.search(r"; console (http://\S+)/#token=(\S+); run dir", bare.serving_line)
        assert match is not None, bare.serving_line
        assert match.group(1) == bare.admin_url and match.group(2) == bare.operator_token
        with bare.client() as client:
            reply = client.post("/api/freeze_gc")
            assert reply.status_code == 200, reply.text
        assert bare.operator_token not in bare.stderr()
        assert "who=console action=freeze_gc" in bare.stderr()


def admin_argv(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "switchboard.cli", "admin", *arguments]


def admin_env(**tokens: str) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if not k.startswith("SWITCHBOARD_ADMIN_")}
    env.update(tokens)
    return env


class TestAdminCommand:
    """``switchboard admin`` by itself: refusals, the generated token, a clean stop."""

    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [
            (("--host", "0.0.0.0", "--allow-remote"), "no token is configured"),
            (("--host", "0.0.0.0"), "beyond loopback"),
            (("--port", "0"), "must be 1..65535"),
            ((), "give --run-dir or --control-endpoint"),
        ],
    )
    def test_refusals(self, tmp_path: Path, arguments: tuple[str, ...], expected: str) -> None:
        """A bad setting exits 2 with one line on stderr."""
        given = arguments if arguments == () else ("--run-dir", str(tmp_path), *arguments)
        result = subprocess.run(
            admin_argv(*given),
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=admin_env(),
            timeout=60,
            check=False,
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1 and expected in lines[0], result.stderr

    def test_bad_token_list_is_refused_without_showing_it(self, tmp_path: Path) -> None:
        """A malformed token list is one line naming the variable, never the tokens."""
        env = admin_env(SWITCHBOARD_ADMIN_OPERATOR_TOKENS="alice:sekrit-1,just-a-secret")
        result = subprocess.run(
            admin_argv("--run-dir", str(tmp_path)),
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=env,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2 and "OPERATOR_TOKENS" in result.stderr
        assert "sekrit" not in result.stderr and "just-a-secret" not in result.stderr

    def test_port_in_use(self, tmp_path: Path) -> None:
        """A port another process listens on is refused."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = str(taken.getsockname()[1])
            result = subprocess.run(
                admin_argv("--run-dir", str(tmp_path), "--port", port),
                capture_output=True,
                text=True,
                cwd=REPO_ROOT,
                env=admin_env(),
                timeout=60,
                check=False,
            )
        assert result.returncode == 2 and "cannot listen on" in result.stderr

    def test_generated_token_and_clean_stop(self, stack: AdminStack, tmp_path: Path) -> None:
        """With no token it prints the console URL on stdout; it serves the stack's router
        and SIGTERM stops it, an open event stream included, with exit status 0."""
        port = free_port()
        out, err = tmp_path / "out", tmp_path / "err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = subprocess.Popen(
                admin_argv("--run-dir", str(stack.run_dir), "--port", str(port)),
                stdout=stdout,
                stderr=stderr,
                cwd=REPO_ROOT,
                env=admin_env(),
                start_new_session=True,
            )
        try:
            line = wait_until(lambda: out.read_text().strip(), 30.0, "the console URL")
            match = re.fullmatch(
                rf"switchboard admin: console http://127\.0\.0\.1:{port}/#token=(\S+)", line
            )
            assert match is not None, line
            token = match.group(1)
            headers = {"Authorization": f"Bearer {token}"}
            base = f"http://127.0.0.1:{port}"
            with (
                httpx.Client(base_url=base, headers=headers, trust_env=False) as client,
                client.stream("GET", "/api/events") as events,
            ):
                assert events.status_code == 200
                lines = events.iter_lines()
                assert next(lines) == "event: snapshot"
                process.send_signal(signal.SIGTERM)
                assert process.wait(timeout=15) == 0
            assert token not in err.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
