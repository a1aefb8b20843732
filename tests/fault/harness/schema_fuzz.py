"""schemathesis over an app's own OpenAPI schema: generated requests, and which answered 5xx.

:func:`fuzz_schema` sends, for every operation of the schema but the ones skipped,
``examples`` generated requests valid by the schema and as many invalid ones
(schemathesis's positive and negative modes, hypothesis driving), and records each
answer's status instead of failing at the first: a run reports every operation that
answered a server error, with the request that did it. ``shorten`` may bound a valid
request's cost (a generation's token count, a barrier's timeout) without changing its
shape. ``allowed`` says which 5xx an operation documents as an answer (a barrier's 504).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

__all__ = ["SchemaRun", "fuzz_schema"]

Case = Any  # schemathesis.Case
Schema = Any  # schemathesis.specs.openapi.schemas.OpenApiSchema
#: No single generated request may take longer.
REQUEST_TIMEOUT_S = 30.0


@dataclass
class SchemaRun:
    """Statuses per operation, and every server error with what caused it."""

    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(counts.total() for counts in self.statuses.values())


def _fuzz_operation(
    operation: Any,
    send: Callable[[Case], requests.Response],
    *,
    examples: int,
    shorten: Callable[[Case], Case],
    allowed: Callable[[Case, requests.Response], bool],
    statuses: Counter[int],
    server_errors: list[str],
) -> None:
    name = f"{operation.method.upper()} {operation.path}"
    strategy = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE).map(shorten),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @settings(
        max_examples=2 * examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def generated(case: Case) -> None:
        response = send(case)
        statuses[response.status_code] += 1
        if response.status_code >= 500 and not allowed(case, response):
            server_errors.append(
                f"{name} -> {response.status_code} {response.text[:200]!r} "
                f"for {case.as_curl_command()[:300]}"
            )

    generated()


def fuzz_schema(
    schema: Schema,
    base_url: str,
    headers: dict[str, str],
    *,
    examples: int,
    skip: frozenset[tuple[str, str]] = frozenset(),
    shorten: Callable[[Case], Case] = lambda case: case,
    allowed: Callable[[Case, requests.Response], bool] = lambda case, response: False,
) -> SchemaRun:
    """Fuzz every operation of ``schema`` served at ``base_url`` (see the module docstring)."""
    run = SchemaRun()
    with requests.Session() as session:
        session.trust_env = False

        def send(case: Case) -> requests.Response:
            response: requests.Response = case.call(
                base_url=base_url, session=session, headers=headers, timeout=REQUEST_TIMEOUT_S
            )
            return response

        for result in schema.get_all_operations():
            operation = result.ok()
            key = (operation.method.upper(), operation.path)
            if key in skip:
                continue
            _fuzz_operation(
                operation,
                send,
                examples=examples,
                shorten=shorten,
                allowed=allowed,
                statuses=run.statuses.setdefault(f"{key[0]} {key[1]}", Counter()),
                server_errors=run.server_errors,
            )
    return run
