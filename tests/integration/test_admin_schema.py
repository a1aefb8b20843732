"""schemathesis over the admin app's OpenAPI schema, against a real running stack.

For every operation (the event stream aside) schemathesis generates requests from the
schema, valid and invalid, and sends them with the operator's token to the admin app of
one ``switchboard up``; every answer must be documented for that operation (status code,
content type, body schema), and none may be a server error, except the 504 a barrier
documents for a timeout. Barrier timeouts are capped at :data:`MAX_BARRIER_S` so a stuck
barrier cannot stall the run. Worker mutations on real worker ids, a viewer's token on
every mutation, and the event stream's head are checked by explicit cases. A backend
defect found here is one explicit case marked ``xfail(strict=True)`` with its reason, so
its fix turns the test red until the mark goes. The module leaves the stack continued and
every worker undrained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.catalogue import COMMANDS
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import missing, wait_until

try:
    import requests
    import schemathesis
    from schemathesis import GenerationMode
    from schemathesis.core import NOT_SET
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )
except ImportError:  # pragma: no cover - reported by the schema fixture
    schemathesis = None

pytestmark = pytest.mark.integration

#: Generated examples per operation and generation mode (valid, invalid).
MAX_EXAMPLES = 12
#: The longest barrier a generated pause or continue may ask for.
MAX_BARRIER_S = 2.0
#: No single request may take longer (a barrier answers within its own timeout).
REQUEST_TIMEOUT_S = 30.0
#: Operations that are barriers: their documented 504 carries the timed-out operation.
BARRIERS = frozenset(path for entry in COMMANDS if entry.barrier for path in entry.paths)
#: Operations the engine carries out: a 502 or 504 is documented for them.
ENGINE_COMMANDS = frozenset(
    path for entry in COMMANDS if entry.engine is not None for path in entry.paths
)
#: Operations that change state, each needing an operator token: every audited command's.
MUTATIONS = tuple(
    (entry.method, path) for entry in COMMANDS if entry.audited for path in entry.paths
)
#: Every operation schemathesis generates requests for: every command's but the stream,
#: and the probes.
GENERATED = (
    *(
        (entry.method, path)
        for entry in COMMANDS
        if not entry.audited
        for path in entry.paths
        if (entry.method, path) != ("GET", "/api/events")
    ),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    *MUTATIONS,
)
#: Streams forever: checked by hand, never generated.
STREAMING = (("GET", "/api/events"),)

Schema = Any  # schemathesis.specs.openapi.schemas.OpenApiSchema
Case = Any  # schemathesis.Case


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """One stack for the module, left healthy: continued, no worker drained."""
    with admin_stack(tmp_path_factory, workers=2) as running:
        try:
            yield running
        finally:
            leave_healthy(running)


def leave_healthy(stack: AdminStack) -> None:
    """Continue, undrain every worker, and wait until both serve again."""
    with stack.client() as client:
        assert client.post("/api/continue", json={"timeout_s": 10}).status_code == 200
        for worker in client.get("/api/workers").json()["workers"]:
            if worker["state"] in ("draining", "drained"):
                client.post(f"/api/workers/{worker['id']}/undrain")

        def serving() -> bool:
            states = [w["state"] for w in client.get("/api/workers").json()["workers"]]
            return states.count("serving") == 2

        wait_until(serving, 30.0, lambda: f"workers serving: {client.get('/api/workers').text}")
        assert client.get("/api/status").json()["paused"] is False


@pytest.fixture(scope="module")
def schema(stack: AdminStack) -> Schema:
    """The admin app's own /openapi.json, as schemathesis loads it."""
    if schemathesis is None:
        missing("schemathesis (pip install -e '.[test]')")
    with anonymous(stack) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200, response.text
    return schemathesis.openapi.from_dict(response.json())


@pytest.fixture(scope="module")
def session() -> Iterator[Any]:
    """The HTTP session schemathesis sends with (proxy variables ignored, as the CLI does)."""
    if schemathesis is None:
        missing("schemathesis (pip install -e '.[test]')")
    with requests.Session() as http:
        http.trust_env = False
        yield http


def anonymous(stack: AdminStack) -> httpx.Client:
    """A client of the admin app that sends no token."""
    return httpx.Client(base_url=stack.admin_url, timeout=10.0, trust_env=False)


def no_server_error(ctx: Any, response: Any, case: Case) -> bool | None:
    """No 5xx, except a barrier's documented 504 (the operation, not complete) and an
    engine command's documented 502/504 in the error shape (a timeout too short to meet,
    as generated timeouts are)."""
    if response.status_code < 500:
        return None
    if response.status_code == 504 and case.operation.path in BARRIERS:
        body = response.json()
        if isinstance(body, dict) and body.get("complete") is False and "stragglers" in body:
            return None
    if response.status_code in (502, 504) and case.operation.path in ENGINE_COMMANDS:
        error = response.json().get("error", {})
        if error.get("code") in ("engine_failed", "timeout") and error.get("message"):
            return None
    raise AssertionError(f"server error {response.status_code}: {response.text[:500]}")


def checks() -> list[Callable[..., bool | None]]:
    """The checks every answer must pass."""
    return [
        no_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]


def short_barrier(case: Case) -> Case:
    """A valid case whose barrier timeout is at most MAX_BARRIER_S."""
    body = case.body
    if isinstance(body, dict) and type(body.get("timeout_s")) in (int, float):
        body["timeout_s"] = min(body["timeout_s"], MAX_BARRIER_S)
    return case


def send(case: Case, stack: AdminStack, session: Any, token: str) -> Any:
    """Send ``case`` to the stack's admin app with ``token`` and run every check."""
    return case.call_and_validate(
        base_url=stack.admin_url,
        session=session,
        headers=stack.headers(token),
        checks=checks(),
        timeout=REQUEST_TIMEOUT_S,
    )


def operations(pairs: tuple[tuple[str, str], ...]) -> list[Any]:
    """``(method, path)`` parameters, each named ``METHOD /path``."""
    return [pytest.param(method, path, id=f"{method} {path}") for method, path in pairs]


class TestSchema:
    """The schema lists every operation the app serves, each documented."""

    def test_every_operation_is_covered(self, schema: Schema) -> None:
        """The generated and streaming operations here are exactly the schema's."""
        listed = {
            (result.ok().method.upper(), result.ok().path) for result in schema.get_all_operations()
        }
        assert listed == set(GENERATED) | set(STREAMING)


class TestGenerated:
    """Generated requests, valid and invalid, get documented answers and no 5xx."""

    @pytest.mark.parametrize(("method", "path"), operations(GENERATED))
    def test_operation_conforms(
        self, schema: Schema, stack: AdminStack, session: Any, method: str, path: str
    ) -> None:
        """MAX_EXAMPLES valid and MAX_EXAMPLES invalid requests, every answer conforming."""
        operation = schema[path][method]
        strategy = st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE).map(short_barrier),
            operation.as_strategy(GenerationMode.NEGATIVE),
        )

        @settings(
            max_examples=2 * MAX_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def conforms(case: Case) -> None:
            send(case, stack, session, stack.operator_token)

        conforms()


class TestExplicit:
    """Answers random ids never reach: real workers, viewers, the stream."""

    def test_worker_lifecycle_conforms(
        self, schema: Schema, stack: AdminStack, session: Any
    ) -> None:
        """A real worker: get, drain (200), drain again, undrain (200), undrain again (409)."""
        with stack.client() as client:
            target = client.get("/api/workers").json()["workers"][0]["id"]
        steps = [
            ("GET", "/api/workers/{worker_id}", {200}),
            ("POST", "/api/workers/{worker_id}/drain", {200}),
            ("POST", "/api/workers/{worker_id}/drain", {200, 409}),
            ("POST", "/api/workers/{worker_id}/undrain", {200}),
            ("POST", "/api/workers/{worker_id}/undrain", {409}),
        ]
        for method, path, statuses in steps:
            case = schema[path][method].Case(path_parameters={"worker_id": target})
            response = send(case, stack, session, stack.operator_token)
            assert response.status_code in statuses, (method, path, response.text)

    @pytest.mark.parametrize(("method", "path"), operations(MUTATIONS))
    def test_viewer_forbidden(
        self, schema: Schema, stack: AdminStack, session: Any, method: str, path: str
    ) -> None:
        """A viewer's token on a mutation: a documented 403 with the error body."""
        operation = schema[path][method]
        parameters = {"worker_id": "w0"} if "{worker_id}" in path else {}
        body = {"timeout_s": 1.0} if path in BARRIERS else NOT_SET
        case = operation.Case(path_parameters=parameters, body=body)
        response = send(case, stack, session, stack.viewer_token)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "forbidden"

    @pytest.mark.parametrize("path", sorted(BARRIERS))
    @pytest.mark.parametrize("timeout", [True, "1"], ids=["true", "string"])
    def test_barrier_timeout_must_be_a_number(
        self, schema: Schema, stack: AdminStack, session: Any, path: str, timeout: Any
    ) -> None:
        """A timeout_s that is not a JSON number is refused with a documented 400."""
        case = schema[path]["POST"].Case(body={"timeout_s": timeout}, media_type="application/json")
        response = send(case, stack, session, stack.operator_token)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "bad_request"

    def test_event_stream_head(self, stack: AdminStack) -> None:
        """/api/events: 401 without a token; with one, an event stream opening on a snapshot."""
        with anonymous(stack) as client:
            refused = client.get("/api/events")
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
        with stack.client(timeout=10.0) as client, client.stream("GET", "/api/events") as events:
            assert events.status_code == 200
            assert events.headers["content-type"].startswith("text/event-stream")
            lines = events.iter_lines()
            first = next(line for line in lines if line and not line.startswith(":"))
            assert first == "event: snapshot"
            assert next(lines).startswith("data: {")
