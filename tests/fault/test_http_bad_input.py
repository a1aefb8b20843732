"""Bad HTTP bodies on the workers and the admin app: a 4xx with a clear message, never 5xx.

Every JSON-body endpoint of both apps gets each bad body of :data:`CASES`: an unknown
field, malformed or non-object JSON, invalid UTF-8, deep nesting, an empty body, a
wrongly typed field, and bodies over the limit, declared (``Content-Length``) and
chunked. Each must be refused with the status the case names and an error body whose
message says what is wrong (for an unknown field: names it). Then schemathesis sends
generated valid and invalid requests for every operation of each app's own OpenAPI
schema: none may answer a server error (a barrier's documented 504 aside).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.catalogue import COMMANDS
from tests.fault.harness.figures import Figures
from tests.fault.harness.modes import scaled
from tests.fault.harness.stack import FaultStack, fault_stack
from tests.integration.harness import wait_until
from tests.integration.harness.polling import missing

pytestmark = [pytest.mark.fault, pytest.mark.integration, pytest.mark.timeout(600)]

#: Over the worker's 16 MiB limit (``docs/http-api.md``); any admin body limit is lower.
OVERSIZED = 17 * 1024 * 1024
UNKNOWN_FIELD = "no_such_field"
MODEL = "switchboard-sim"
#: Valid bodies of each JSON-body endpoint, by app.
WORKER_BODIES: dict[str, dict[str, Any]] = {
    "/generate": {"text": "hi", "sampling_params": {"max_new_tokens": 2}},
    "/v1/completions": {"model": MODEL, "prompt": "hi", "max_tokens": 2},
    "/v1/embeddings": {"model": MODEL, "input": "hi"},
    "/encode": {"text": "hi"},
}
#: The admin barriers' bodies are optional (docs/operations.md), so an empty one is valid.
ADMIN_BODIES: dict[str, dict[str, Any]] = {
    "/api/pause": {"mode": "in_place", "timeout_s": 2},
    "/api/continue": {"timeout_s": 2},
}
SCHEMA_EXAMPLES = scaled(10, 100)


@dataclass(frozen=True)
class BadBody:
    """One kind of bad body, and the status it must get."""

    name: str
    status: int
    #: A word the error message must contain (case-insensitive), if any.
    mentions: str = ""
    #: Whether it is bad for an endpoint whose body is optional (the admin barriers').
    bad_when_optional: bool = True

    def content(self, valid: dict[str, Any]) -> bytes | Iterator[bytes]:
        """The bytes to send instead of ``valid``."""
        if self.name == "unknown field":
            return json.dumps({**valid, UNKNOWN_FIELD: 1}).encode()
        if self.name == "wrongly typed field":
            first = next(iter(valid))
            return json.dumps({**valid, first: {"nested": [1, 2]}}).encode()
        fixed = {
            "malformed JSON": b'{"text": ',
            "not an object": b"[1, 2]",
            "invalid UTF-8": b'{"text": "\xff\xfe"}',
            "deeply nested": b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "empty body": b"",
            "oversized, declared": b'{"text": "' + b"a" * OVERSIZED + b'"}',
        }
        if self.name in fixed:
            return fixed[self.name]
        assert self.name == "oversized, chunked", self.name
        whole = b'{"text": "' + b"a" * OVERSIZED + b'"}'
        return (whole[start : start + (1 << 20)] for start in range(0, len(whole), 1 << 20))


CASES = [
    BadBody("unknown field", 400, UNKNOWN_FIELD),
    BadBody("malformed JSON", 400),
    BadBody("not an object", 400),
    BadBody("invalid UTF-8", 400),
    BadBody("deeply nested", 400),
    BadBody("empty body", 400, bad_when_optional=False),
    BadBody("wrongly typed field", 400),
    BadBody("oversized, declared", 413),
    BadBody("oversized, chunked", 413),
]

#: The admin endpoints here take an optional body.
ADMIN_CASES = [case for case in CASES if case.bad_when_optional]
#: The workers ignore (and count) an unknown field by default: SGLang's gateway and new
#: SDKs send fields no endpoint names (test_worker_ignores_an_unknown_field).
WORKER_CASES = [case for case in CASES if case.name != "unknown field"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    """One stack for the module (nothing here harms it), left continued."""
    with fault_stack(tmp_path_factory.mktemp("http-bad-input")) as running:
        yield running
        with running.admin() as admin:
            assert admin.post("/api/continue", json={"timeout_s": 5}).status_code == 200


def _message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error", {})
    except ValueError:
        return ""
    return str(error.get("message", "")) if isinstance(error, dict) else ""


def refusals(client: httpx.Client, bodies: dict[str, dict[str, Any]], case: BadBody) -> list[str]:
    """What is wrong with each endpoint's answer to ``case`` (empty if nothing)."""
    problems = []
    for path, valid in bodies.items():
        try:
            response = client.post(
                path, content=case.content(valid), headers={"Content-Type": "application/json"}
            )
        except httpx.HTTPError as exc:
            problems.append(f"{path}: {type(exc).__name__}: {exc}")
            continue
        message = _message(response)
        if response.status_code != case.status:
            problems.append(f"{path}: {response.status_code} {message or response.text[:120]!r}")
        elif not message or case.mentions.lower() not in message.lower():
            problems.append(f"{path}: {response.status_code} without a clear message: {message!r}")
    return problems


class TestBadBodies:
    @pytest.mark.parametrize("case", WORKER_CASES, ids=[case.name for case in WORKER_CASES])
    def test_worker(self, stack: FaultStack, case: BadBody) -> None:
        """Every worker endpoint with a JSON body refuses the bad body, clearly."""
        with httpx.Client(base_url=stack.base_url, timeout=60.0, trust_env=False) as client:
            problems = refusals(client, WORKER_BODIES, case)
        figures = Figures(f"bad input: worker, {case.name}")
        figures.set("endpoints", len(WORKER_BODIES))
        figures.set("wanted", case.status)
        figures.notes += problems
        figures.report()
        assert problems == []

    def test_worker_ignores_an_unknown_field(self, stack: FaultStack) -> None:
        """An unknown field is ignored: each endpoint answers 200, and the stack's
        /metrics counts the field per endpoint."""
        problems = []
        with httpx.Client(base_url=stack.base_url, timeout=60.0, trust_env=False) as client:
            for path, valid in WORKER_BODIES.items():
                response = client.post(path, json={**valid, UNKNOWN_FIELD: 1})
                if response.status_code != 200:
                    problems.append(f"{path}: {response.status_code} {response.text[:120]!r}")
        assert problems == []

        def counted() -> set[str]:
            with stack.admin() as admin:
                text = admin.get("/metrics").text
            return {
                line.split('handler="')[1].split('"')[0]
                for line in text.splitlines()
                if line.startswith("switchboard_ignored_fields_total{")
                and f'field="{UNKNOWN_FIELD}"' in line
                and not line.endswith(" 0.0")
            }

        # Worker metrics reach the files on the next flush (at most a second later).
        wait_until(lambda: counted() >= set(WORKER_BODIES), 10.0, "the ignored fields counted")

    @pytest.mark.parametrize("case", ADMIN_CASES, ids=[case.name for case in ADMIN_CASES])
    def test_admin(self, stack: FaultStack, case: BadBody) -> None:
        """Every admin endpoint with a JSON body refuses the bad body, clearly."""
        with stack.admin(timeout=60.0) as client:
            problems = refusals(client, ADMIN_BODIES, case)
        figures = Figures(f"bad input: admin app, {case.name}")
        figures.set("endpoints", len(ADMIN_BODIES))
        figures.set("wanted", case.status)
        figures.notes += problems
        figures.report()
        assert problems == []


def _cap_tokens(case: Any) -> Any:
    """A valid generation asks for at most 16 tokens (the shape is unchanged)."""
    body = case.body
    if isinstance(body, dict):
        for key in ("max_tokens", "max_new_tokens"):
            if type(body.get(key)) is int:
                body[key] = min(body[key], 16)
        params = body.get("sampling_params")
        for each in params if isinstance(params, list) else [params]:
            if isinstance(each, dict) and type(each.get("max_new_tokens")) is int:
                each["max_new_tokens"] = min(each["max_new_tokens"], 16)
    return case


BARRIERS = frozenset(path for entry in COMMANDS if entry.barrier for path in entry.paths)
#: Commands the engine carries out: a 502 or 504 in the error shape is documented.
ENGINE_COMMANDS = frozenset(
    path for entry in COMMANDS if entry.engine is not None for path in entry.paths
)


def _short_barrier(case: Any) -> Any:
    """A valid barrier waits at most 2 s."""
    body = case.body
    if isinstance(body, dict) and type(body.get("timeout_s")) in (int, float):
        body["timeout_s"] = min(body["timeout_s"], 2.0)
    return case


def _barrier_timeout(case: Any, response: Any) -> bool:
    """A barrier's documented 504 (the operation, not complete), or an engine command's
    documented 502/504 (an error naming why: a generated timeout too short to meet)."""
    body = response.json()
    if not isinstance(body, dict):
        return False
    path = case.operation.path
    if response.status_code == 504 and path in BARRIERS and body.get("complete") is False:
        return True
    error = body.get("error") or {}
    return (
        response.status_code in (502, 504)
        and path in ENGINE_COMMANDS
        and error.get("code") in ("engine_failed", "timeout")
        and bool(error.get("message"))
    )


class TestSchemathesis:
    def _schema(self, url: str, headers: dict[str, str]) -> Any:
        try:
            schemathesis = importlib.import_module("schemathesis")
        except ImportError:
            missing("schemathesis (pip install -e '.[test]')")
        response = httpx.get(f"{url}/openapi.json", headers=headers, trust_env=False)
        assert response.status_code == 200, response.text
        return schemathesis.openapi.from_dict(response.json())

    def test_worker_schema(self, stack: FaultStack) -> None:
        """Generated requests for every worker operation: no 5xx."""
        from tests.fault.harness.schema_fuzz import fuzz_schema

        schema = self._schema(stack.base_url, {})
        pids = stack.roles()
        run = fuzz_schema(schema, stack.base_url, {}, examples=SCHEMA_EXAMPLES, shorten=_cap_tokens)
        self._report("worker", run, pids == stack.roles())
        assert run.server_errors == []
        assert pids == stack.roles()

    def test_admin_schema(self, stack: FaultStack) -> None:
        """Generated requests for every admin operation (the event stream aside): no 5xx."""
        from tests.fault.harness.schema_fuzz import fuzz_schema

        headers = {"Authorization": f"Bearer {stack.token}"}
        schema = self._schema(stack.admin_url, headers)
        pids = stack.roles()
        run = fuzz_schema(
            schema,
            stack.admin_url,
            headers,
            examples=SCHEMA_EXAMPLES,
            skip=frozenset({("GET", "/api/events")}),
            shorten=_short_barrier,
            allowed=_barrier_timeout,
        )
        self._report("admin app", run, pids == stack.roles())
        assert run.server_errors == []
        assert pids == stack.roles()

    def _report(self, app: str, run: Any, unchanged: bool) -> None:
        figures = Figures(f"bad input: schemathesis, {app} schema")
        figures.set("operations", len(run.statuses))
        figures.set("requests", run.requests)
        every: dict[int, int] = {}
        for counts in run.statuses.values():
            for status, count in counts.items():
                every[status] = every.get(status, 0) + count
        figures.set("statuses", dict(sorted(every.items())))
        figures.set("pids_unchanged", unchanged)
        figures.notes += run.server_errors
        figures.report()
