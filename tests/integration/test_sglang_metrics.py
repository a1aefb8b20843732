# ruff: noqa: E501  (the dashboard's queries are data, kept as published, one per line)
"""SGLang's dashboard works on the serving port: a real Prometheus scrapes the workers'
``/metrics`` and runs the queries of SGLang's published Grafana dashboard.

``switchboard up`` runs 2 workers (they share the port; a scrape reaches either, and
each answers for the whole host). Requests of known sizes go to ``/generate`` and
``/v1/completions``; the serving port's ``sglang:prompt_tokens_total`` and
``sglang:generation_tokens_total`` must grow by exactly what was sent and generated,
and every query of the dashboard must return a number.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import wait_until
from tests.integration.harness.prometheus import (
    Prometheus,
    has_finite_value,
    running_prometheus,
)

pytestmark = pytest.mark.integration

MODEL = "switchboard-sim"
#: The PromQL of SGLang's Grafana dashboard (sgl-project/sglang,
#: examples/monitoring/grafana/dashboards/json/sglang-dashboard.json at 0e6ed14d,
#: every panel's ``expr``), with Grafana's ``$__rate_interval`` and ``$model_name``
#: filled in as Grafana would for this stack.
DASHBOARD_QUERIES = [
    "histogram_quantile(0.99, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket[$__rate_interval])))",
    "histogram_quantile(0.9, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket[$__rate_interval])))",
    "histogram_quantile(0.5, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket[$__rate_interval])))",
    "avg(rate(sglang:e2e_request_latency_seconds_sum[$__rate_interval]) /  rate(sglang:e2e_request_latency_seconds_count[$__rate_interval]))",
    'sum(increase(sglang:e2e_request_latency_seconds_bucket{model_name=~"$model_name"}[$__rate_interval])) by (le)',
    "histogram_quantile(0.99, sum by (le) (rate(sglang:time_to_first_token_seconds_bucket[$__rate_interval])))",
    "histogram_quantile(0.9, sum by (le) (rate(sglang:time_to_first_token_seconds_bucket[$__rate_interval])))",
    "histogram_quantile(0.5, sum by (le) (rate(sglang:time_to_first_token_seconds_bucket[$__rate_interval])))",
    "avg(rate(sglang:time_to_first_token_seconds_sum[$__rate_interval]) /  rate(sglang:time_to_first_token_seconds_count[$__rate_interval]))",
    'sum by(le) (increase(sglang:time_to_first_token_seconds_bucket{model_name=~"$model_name"}[$__rate_interval]))',
    "sglang:num_running_reqs",
    "sglang:gen_throughput",
    "sglang:cache_hit_rate",
    "sglang:num_queue_reqs",
]
VARIABLES = {"$__rate_interval": "1m", "$model_name": MODEL}
PROMPT_IDS = [5, 6, 7, 8, 9, 10, 11]
NEW_TOKENS = 6
REQUESTS = 6
#: The longest the background load runs while Prometheus scrapes.
LOAD_S = 120.0


def filled(query: str) -> str:
    for name, value in VARIABLES.items():
        query = query.replace(name, value)
    return query


def token_totals(stack: AdminStack) -> dict[str, float]:
    """The serving port's SGLang token counters, read directly."""
    text = httpx.get(f"{stack.base_url}/metrics", timeout=10.0, trust_env=False).text
    totals = {"prompt": 0.0, "generation": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("sglang:prompt_tokens_total", "sglang:generation_tokens_total"):
                assert sample.labels == {"model_name": MODEL}
                totals[sample.name.removeprefix("sglang:").split("_")[0]] += sample.value
    return totals


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    with admin_stack(tmp_path_factory, workers=2) as running:
        yield running


def send(stack: AdminStack, requests: int) -> dict[str, float]:
    """Send ``requests`` requests; what they used, by the answers' own counts."""
    used = {"prompt": 0.0, "generation": 0.0}
    for index in range(requests):
        # A fresh connection each time, so the kernel spreads them over both workers.
        with httpx.Client(base_url=stack.base_url, timeout=30.0, trust_env=False) as client:
            if index % 2:
                answer = client.post(
                    "/v1/completions",
                    json={
                        "model": MODEL,
                        "prompt": PROMPT_IDS,
                        "max_tokens": NEW_TOKENS,
                        "ignore_eos": True,
                    },
                )
                answer.raise_for_status()
                usage = answer.json()["usage"]
                used["prompt"] += usage["prompt_tokens"]
                used["generation"] += usage["completion_tokens"]
            else:
                answer = client.post(
                    "/generate",
                    json={
                        "input_ids": PROMPT_IDS,
                        "sampling_params": {"max_new_tokens": NEW_TOKENS, "ignore_eos": True},
                    },
                )
                answer.raise_for_status()
                meta = answer.json()["meta_info"]
                used["prompt"] += meta["prompt_tokens"]
                used["generation"] += meta["completion_tokens"]
    return used


@pytest.fixture(scope="module")
def before(stack: AdminStack) -> dict[str, float]:
    """The serving port's token totals before the test's requests."""
    return token_totals(stack)


@pytest.fixture(scope="module")
def sent(stack: AdminStack, before: dict[str, float]) -> dict[str, float]:
    """What the test's requests used."""
    used = send(stack, REQUESTS)
    assert used == {
        "prompt": REQUESTS * len(PROMPT_IDS),
        "generation": REQUESTS * NEW_TOKENS,
    }
    return used


@pytest.fixture(scope="module")
def prometheus(stack: AdminStack, sent: dict[str, float]) -> Iterator[Prometheus]:
    """Prometheus scraping the serving port while requests keep coming (rates and
    quantiles need counters that grow between scrapes), for at most LOAD_S."""
    target = stack.base_url.removeprefix("http://")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "sglang", "static_configs": [{"targets": [target]}]}],
    }
    stop = threading.Event()

    def load() -> None:
        deadline = time.monotonic() + LOAD_S
        while not stop.is_set() and time.monotonic() < deadline:
            send(stack, 2)

    loader = threading.Thread(target=load, name="load", daemon=True)
    with running_prometheus(config) as server:
        loader.start()
        try:
            yield server
        finally:
            stop.set()
            loader.join(timeout=60.0)


def test_token_counters_count_exactly_what_was_sent(
    stack: AdminStack, before: dict[str, float], sent: dict[str, float]
) -> None:
    expected = {kind: before[kind] + sent[kind] for kind in sent}
    # Per-token counts are written out by the workers each second: wait for them.
    wait_until(
        lambda: token_totals(stack) == expected or None,
        15.0,
        lambda: f"the serving port's totals {token_totals(stack)} never reached {expected}",
    )


def test_prometheus_reads_them_under_sglangs_names(
    sent: dict[str, float], prometheus: Prometheus
) -> None:
    result = prometheus.wait_for_query(
        f'sglang:prompt_tokens_total{{model_name="{MODEL}"}}',
        accept=lambda found: bool(found) and float(found[0]["value"][1]) >= sent["prompt"],
    )
    assert result[0]["metric"]["job"] == "sglang"


@pytest.mark.parametrize("query", DASHBOARD_QUERIES)
def test_every_dashboard_query_has_a_number(prometheus: Prometheus, query: str) -> None:
    result = prometheus.wait_for_query(filled(query), accept=has_finite_value)
    assert result


def test_the_switchboard_families_are_served_beside(stack: AdminStack) -> None:
    text = httpx.get(f"{stack.base_url}/metrics", timeout=10.0, trust_env=False).text
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {"switchboard_http_requests", "switchboard_prompt_tokens"} <= names
