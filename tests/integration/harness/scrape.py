"""Reading a live stack's ``/metrics`` and putting load on it, for the metrics tests.

:func:`scrape` fetches the admin app's exposition; :func:`families` parses it with
prometheus_client's own parser; :func:`sample_sum` adds up the samples of one metric
that match some labels. :func:`generate` sends one complete ``/generate`` on a fresh
connection, so the kernel spreads a run of them over the workers; :func:`some_load` gives
every worker family data.
"""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.harness.admin_stack import AdminStack

__all__ = ["families", "generate", "sample_sum", "samples", "scrape", "some_load"]


def scrape(stack: AdminStack, token: str | None = None) -> str:
    """The admin app's ``/metrics`` body (a viewer's token unless ``token`` is given)."""
    with stack.client(stack.viewer_token if token is None else token) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    return answer.text


def families(text: str) -> dict[str, Any]:
    """The exposition's families by name (counters without ``_total``)."""
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(text: str, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
    """``(labels, value)`` of every sample named ``name`` whose labels include ``labels``."""
    found = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                found.append((dict(sample.labels), sample.value))
    return found


def sample_sum(text: str, name: str, **labels: str) -> float:
    """The sum of :func:`samples`."""
    return sum(value for _, value in samples(text, name, **labels))


def generate(base_url: str, *, max_new_tokens: int = 4) -> None:
    """One complete ``POST /generate`` on its own connection; fails unless 200."""
    body = {"text": "hello metrics", "sampling_params": {"max_new_tokens": max_new_tokens}}
    answer = httpx.post(
        f"{base_url}/generate",
        json=body,
        headers={"Connection": "close"},
        timeout=30.0,
        trust_env=False,
    )
    assert answer.status_code == 200, answer.text


def some_load(stack: AdminStack) -> None:
    """Complete generations, a stream and a bad request, so every worker family has data."""
    for _ in range(6):
        generate(stack.base_url)
    with httpx.Client(base_url=stack.base_url, timeout=30.0, trust_env=False) as client:
        body = {"model": "switchboard-sim", "prompt": "hi", "max_tokens": 8, "stream": True}
        with client.stream("POST", "/v1/completions", json=body) as answer:
            assert answer.status_code == 200
            assert any(line == "data: [DONE]" for line in answer.iter_lines())
        assert client.post("/generate", json={"no": "prompt"}).status_code == 400
