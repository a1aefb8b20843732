"""A real Prometheus scrapes a real stack under load with the shipped config and alert rules.

``switchboard up`` runs 2 workers and 2 detokenizers with admin tokens configured. Debian's
Prometheus runs with ``deploy/prometheus/prometheus.yml`` as shipped, changed only where a
test must: the admin app's real port as the one target, 1 s intervals, the viewer token in
a ``credentials_file`` as the file's comment says, and ``alerts.yml`` copied beside it.

While threads stream ``/generate`` and ``/v1/completions`` on fresh connections (so the
kernel spreads them over both workers), the module pauses and continues generation
through the admin API, sends two bad requests, and makes each router count one fault
that only a broken peer causes: a frame that is not a header (``rejected``) and an output
row for a worker nobody registered (``dropped``). Every dashboard panel then has
something to show. Prometheus's first scrape comes about 6 s after it starts, so each
check polls with a deadline while the load goes on.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
import zmq

from dashboards import JSON_DIR
from dashboards.queries import PanelQuery, panel_queries
from router_core.endpoints import RouterEndpoints
from router_core.wire import frame_batch
from router_core.wire.outputs import BatchStrOutput
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import REPO_ROOT, wait_until
from tests.integration.harness.prometheus import (
    QUERY_S,
    Prometheus,
    has_finite_value,
    running_prometheus,
)
from tests.support.zmq_context import bounded_context

pytestmark = pytest.mark.integration

DEPLOY = REPO_ROOT / "deploy" / "prometheus"
JOB = "switchboard"
MODEL = "switchboard-sim"
TOKENS = 24
#: Streams of each kind running at once.
STREAMS_PER_ENDPOINT = 2
#: Each check's deadline, counted from when the check starts (the load keeps running).
CHECK_S = 30.0
#: Dashboard variables: a worker the stack runs, and Grafana's rate window.
VARIABLES = {"worker": "w0", "__rate_interval": "1m"}
#: Alerts a healthy, serving stack must never have pending or firing.
AVAILABILITY_ALERTS = frozenset(
    {
        "SwitchboardScrapeDown",
        "SwitchboardRouterUnreachable",
        "SwitchboardNoWorkerServing",
        "SwitchboardWorkerDown",
    }
)


def scrape_config(target: str) -> dict[str, Any]:
    """The shipped prometheus.yml scraping ``target`` every second with a viewer token."""
    shipped = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    config = copy.deepcopy(shipped)
    config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    (job,) = config["scrape_configs"]
    assert job["job_name"] == JOB, job
    job.update(scrape_interval="1s", scrape_timeout="1s")
    job["static_configs"] = [{"targets": [target]}]
    job["authorization"] = {"type": "Bearer", "credentials_file": "viewer.token"}
    assert config["rule_files"] == ["alerts.yml"], config["rule_files"]
    return config


class Load:
    """Streaming ``/generate`` and ``/v1/completions`` from threads until :meth:`stop`."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.done: Counter[str] = Counter()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(path,), name=f"load {path}", daemon=True)
            for path in ("/generate", "/v1/completions")
            for _ in range(STREAMS_PER_ENDPOINT)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30.0)
        assert not any(thread.is_alive() for thread in self._threads), "a load thread hangs"

    def _body(self, path: str) -> dict[str, Any]:
        if path == "/generate":
            return {"text": "hello", "sampling_params": {"max_new_tokens": TOKENS}, "stream": True}
        return {"model": MODEL, "prompt": "hello", "max_tokens": TOKENS, "stream": True}

    def _run(self, path: str) -> None:
        # No keep-alive: each request is a new connection, which SO_REUSEPORT spreads.
        limits = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(
            base_url=self.base_url, timeout=30.0, limits=limits, trust_env=False
        ) as client:
            while not self._stop.is_set():
                try:
                    with client.stream("POST", path, json=self._body(path)) as response:
                        chunks = sum(1 for line in response.iter_lines() if line.strip())
                    if response.status_code != 200 or chunks == 0:
                        self.errors.append(f"{path}: {response.status_code}, {chunks} chunks")
                    else:
                        self.done[path] += 1
                except httpx.HTTPError as error:
                    self.errors.append(f"{path}: {error!r}")
                if self.errors:
                    return  # the stack is broken: teardown reports it; no busy loop


def forge_faults(run_dir: Path) -> None:
    """One rejected frame and one dropped row at the tokenizer router, as a broken peer
    would cause them: a frame that is not a header on ``requests``, and an output batch on
    ``outputs`` whose only row belongs to a worker nobody registered."""
    endpoints = RouterEndpoints.in_run_dir(run_dir)
    ghost = BatchStrOutput(
        rids=["ghost-1"], http_worker_ipcs=[f"ipc://{run_dir}/worker-ghost"], output_strs=["x"]
    )
    # Beyond the sockets' 5 s linger: term() waits that long for a dead peer.
    with bounded_context(bound_s=10.0) as context:
        for endpoint, frames in (
            (endpoints.requests, [b"not a header"]),
            (endpoints.outputs, frame_batch(ghost)),
        ):
            with context.socket(zmq.PUSH) as push:
                # Linger lets the queued message out before close; 5 s bounds a dead peer.
                push.setsockopt(zmq.LINGER, 5000)
                push.connect(endpoint)
                push.send_multipart(frames)


def pause_and_continue(admin: httpx.Client) -> None:
    """Pause in place (streams stall) and continue, through the admin API."""
    paused = admin.post("/api/pause", json={"mode": "in_place", "timeout_s": 5})
    assert paused.status_code == 200, paused.text
    resumed = admin.post("/api/continue", json={"timeout_s": 5})
    assert resumed.status_code == 200, resumed.text


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """``switchboard up`` with 2 workers, 2 detokenizers and viewer/operator tokens."""
    with admin_stack(tmp_path_factory, workers=2, extra_args=("--detokenizers", "2")) as running:
        yield running


@pytest.fixture(scope="module")
def prometheus(stack: AdminStack) -> Iterator[Prometheus]:
    """Prometheus scraping the stack's admin app every second, with the shipped rules."""
    target = stack.admin_url.removeprefix("http://")
    files = {
        "alerts.yml": (DEPLOY / "alerts.yml").read_text(),
        "viewer.token": stack.viewer_token + "\n",
    }
    with running_prometheus(scrape_config(target), files=files) as server:
        yield server


@pytest.fixture(scope="module")
def loaded(stack: AdminStack, prometheus: Prometheus) -> Iterator[Load]:
    """Load running, a pause and continue done, bad requests and router faults counted.

    The load keeps running until every test of the module has run, and must have seen no
    failed request.
    """
    load = Load(stack.base_url)
    load.start()
    try:
        wait_until(
            lambda: min(load.done[p] for p in ("/generate", "/v1/completions")),
            30.0,
            lambda: f"a finished stream of each kind ({load.done}, {load.errors})",
        )
        with stack.client() as admin:
            pause_and_continue(admin)
            # The first pause makes the barrier histograms' series; a rate needs scrapes
            # that see them grow, so pause again once Prometheus holds them.
            prometheus.wait_for_query('switchboard_pause_barrier_seconds_count{operation="pause"}')
            pause_and_continue(admin)
        with httpx.Client(base_url=stack.base_url, timeout=10.0, trust_env=False) as client:
            for path in ("/generate", "/v1/completions"):
                bad = client.post(
                    path, content=b"{not json", headers={"Content-Type": "application/json"}
                )
                assert bad.status_code == 400, (path, bad.status_code, bad.text)
        forge_faults(stack.run_dir)
        yield load
    finally:
        load.stop()
    assert not load.errors, load.errors[:10]


def dashboard_queries() -> list[PanelQuery]:
    """Every panel query of every committed dashboard, variables substituted."""
    paths = sorted(JSON_DIR.glob("*.json"))
    assert paths, f"no dashboards in {JSON_DIR}"
    return [
        query
        for path in paths
        for query in panel_queries(json.loads(path.read_text(encoding="utf-8")), VARIABLES)
    ]


class TestPrometheusScrape:
    def test_the_switchboard_target_is_up(
        self, stack: AdminStack, prometheus: Prometheus, loaded: Load
    ) -> None:
        """The shipped scrape job, with a viewer token, scrapes the admin app: ``up`` is 1."""
        result = prometheus.wait_for_query(f'up{{job="{JOB}"}} == 1', timeout=QUERY_S)
        instances = [sample["metric"]["instance"] for sample in result]
        assert instances == [stack.admin_url.removeprefix("http://")]

    def test_every_dashboard_panel_query_returns_data(
        self, prometheus: Prometheus, loaded: Load
    ) -> None:
        """Every query of every panel of every dashboard returns a series with a number."""
        pending = {query.expr: query for query in dashboard_queries()}

        def all_answered() -> bool:
            for expr in list(pending):
                if has_finite_value(prometheus.query(expr)):
                    del pending[expr]
            return not pending

        def without_data() -> str:
            return "data for every panel query; without:\n" + "\n".join(
                f"{q.dashboard} / {q.panel} ({q.ref_id}): {q.expr}" for q in pending.values()
            )

        wait_until(all_answered, CHECK_S, without_data, interval=0.5)

    def test_alert_rules_load_and_evaluate_without_error(
        self, prometheus: Prometheus, loaded: Load
    ) -> None:
        """Every rule of alerts.yml is loaded and evaluates to health "ok" on the live
        series, and none of the availability alerts is pending or firing."""
        shipped = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
        names = sorted(rule["alert"] for group in shipped["groups"] for rule in group["rules"])

        def evaluated() -> list[dict[str, Any]] | None:
            rules = prometheus.rules()
            broken = [rule for rule in rules if rule["health"] == "err"]
            assert not broken, [(rule["name"], rule.get("lastError")) for rule in broken]
            return rules if rules and all(rule["health"] == "ok" for rule in rules) else None

        rules = wait_until(evaluated, CHECK_S, "every rule evaluated", 0.25)
        assert sorted(rule["name"] for rule in rules) == names
        # A pause a moment ago may leave one evaluation that saw it half done; a rule that
        # misreads the live series stays pending and fails here.
        active: list[tuple[str, str]] = []

        def quiet() -> bool:
            active[:] = [
                (alert["labels"]["alertname"], alert["state"])
                for alert in prometheus.alerts()
                if alert["labels"]["alertname"] in AVAILABILITY_ALERTS
            ]
            return not active

        wait_until(quiet, CHECK_S, lambda: f"no availability alert active (active: {active})")
