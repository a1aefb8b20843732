"""The admin API against a real stack (``switchboard up``): auth on every endpoint and
every read. The barrier, drain, freeze GC and the audit log are in
``test_admin_api_mutations.py``, the event stream in ``test_admin_api_events.py`` and the
``switchboard admin`` command by itself in ``test_admin_command.py``; they share this
module's fixtures and helpers.

One stack serves the whole module; tests leave it serving and unpaused.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.catalogue import COMMANDS
from tests.integration.harness import wait_until
from tests.integration.harness.admin_stack import AdminStack, admin_stack

pytestmark = pytest.mark.integration

MUTATIONS = [
    ("POST", "/api/pause", {"mode": "abort", "timeout_s": 2}),
    ("POST", "/api/continue", {}),
    ("POST", "/pause_generation", {}),
    ("POST", "/continue_generation", None),
    ("POST", "/api/workers/w0/drain", None),
    ("POST", "/api/workers/w0/undrain", None),
    ("POST", "/api/freeze_gc", None),
    ("POST", "/api/abort", {"rid": "no-such-request"}),
    ("POST", "/abort_request", {"rid": "no-such-request"}),
    ("POST", "/api/flush_cache", None),
    ("POST", "/flush_cache", None),
    ("POST", "/api/update_weights", {"version": "listed", "mode": "retract"}),
    ("POST", "/update_weights_from_disk", {"weight_version": "listed-sglang"}),
]
READS = ["/api/workers", "/api/workers/w0", "/api/status", "/api/load", "/api/commands"]


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

    def test_every_catalogue_mutation_is_listed(self) -> None:
        """MUTATIONS holds every operator command of the catalogue, at each of its paths."""
        listed = {(method, path) for method, path, _ in MUTATIONS}
        wanted = {
            (entry.method, path.replace("{worker_id}", "w0"))
            for entry in COMMANDS
            if entry.role == "operator"
            for path in entry.paths
        }
        assert listed == wanted

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
        assert load["features"] == [] and load["engine_started_ns"] > 0, load

    def test_commands(self, viewer: httpx.Client) -> None:
        """``GET /api/commands`` lists the catalogue: each command's path, role and names."""
        listed = {item["name"]: item for item in viewer.get("/api/commands").json()["commands"]}
        assert list(listed) == [entry.name for entry in COMMANDS]
        pause = listed["pause"]
        assert (pause["method"], pause["path"], pause["aliases"]) == (
            "POST",
            "/api/pause",
            ["/pause_generation"],
        )
        assert pause["role"] == "operator" and pause["audited"] and pause["cli"] == "pause"
        assert listed["freeze_gc"]["console"]["scope"] == "engine"
        assert listed["status"]["console"] is None

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
