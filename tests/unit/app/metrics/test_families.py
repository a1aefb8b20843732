"""The admin app's ``/metrics``: router snapshots as families, merged with the workers'
multiprocess files into one exposition. Scrapes over real control sockets and the route
are in ``test_scrape.py``.

Snapshots are canned (the shape of the routers' ``metrics`` command); the multiprocess
files are written by a real worker recorder in a child process, as under ``switchboard up``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from app.metrics.exposition import merge_families, multiprocess_families, render
from app.metrics.families import router_families, router_up_family, worker_ids_by_address
from router_core.control.replies import RouterMetrics, TokenizerRouterMetrics
from router_core.histogram import HOP_BUCKETS, Histogram
from switchboard.supervisor.metrics_dir import MetricsDirectory
from tests.integration.harness.polling import REPO_ROOT, missing


def histogram(bounds: tuple[float, ...], *values: float) -> dict[str, Any]:
    """A router histogram snapshot of ``values``."""
    series = Histogram(bounds)
    for value in values:
        series.observe(value)
    return series.snapshot()


def tokenizer_snapshot() -> dict[str, Any]:
    """What the tokenizer router answers to ``metrics`` (see the contract)."""
    return {
        "process": "tokenizer_router",
        "pid": 4242,
        "traffic": [
            {"route": "forward", "worker": "w0", "messages": 3, "bytes": 300},
            {"route": "control", "worker": "w0", "messages": 2, "bytes": 40},
        ],
        "dropped": {"backlog_full": 1},
        "rejected": {"bad_header": 2},
        "histograms": {
            "hop_latency_seconds": {"forward": histogram(HOP_BUCKETS, 0.0001, 0.002)},
            "split_batch_rows": {},
            "pause_barrier_seconds": {"pause": histogram((0.1, 1.0), 0.05)},
        },
        "backlog_messages": 4,
        "workers": [
            {
                "worker": "w0",
                "address": "ipc:///run/worker-w0",
                "state": "serving",
                "up": 1,
                "last_heartbeat_unix_s": 1700000000.5,
                "in_flight": 2,
            },
            {
                "worker": "w0",
                "address": "ipc:///run/worker-w0",
                "state": "dead",
                "up": 0,
                "last_heartbeat_unix_s": 1690000000.0,
                "in_flight": 0,
            },
        ],
        "workers_by_state": {"serving": 1, "dead": 0},
        "paused": False,
        "pause_state_since_unix_s": 1700000000.0,
        "pause_operations": [
            {"operation": "pause", "mode": "abort", "result": "complete", "count": 1}
        ],
        "engine": {"up": True, "running": 5, "waiting": 1, "max_running": 256, "token_usage": 0.25},
    }


def detokenizer_snapshot() -> dict[str, Any]:
    """What the detokenizer router answers: the fabric families only."""
    return {
        "process": "detokenizer_router",
        "pid": 4243,
        "traffic": [
            {"route": "detokenize", "worker": "ipc:///run/worker-w0", "messages": 7, "bytes": 700}
        ],
        "dropped": {},
        "rejected": {},
        "histograms": {
            "hop_latency_seconds": {"detokenize": histogram(HOP_BUCKETS, 0.0003)},
            "split_batch_rows": {"detokenize": histogram((1.0, 2.0, 4.0), 1, 3)},
        },
        "backlog_messages": 0,
    }


def tokenizer_metrics(snapshot: dict[str, Any] | None = None) -> TokenizerRouterMetrics:
    """A tokenizer router snapshot (default: :func:`tokenizer_snapshot`) as the client
    decodes it."""
    return msgspec.convert(snapshot or tokenizer_snapshot(), TokenizerRouterMetrics)


def detokenizer_metrics(snapshot: dict[str, Any] | None = None) -> RouterMetrics:
    """A detokenizer router snapshot as the client decodes it."""
    return msgspec.convert(snapshot or detokenizer_snapshot(), RouterMetrics)


def by_name(families: list[Metric]) -> dict[str, Metric]:
    return {family.name: family for family in families}


def value(family: Metric, sample: str, **labels: str) -> float:
    """The one sample of ``family`` named ``sample`` with exactly ``labels``."""
    found = [s.value for s in family.samples if s.name == sample and s.labels == labels]
    assert len(found) == 1, f"{sample}{labels}: {found} in {family.samples}"
    return found[0]


def parse(text: bytes) -> dict[str, Any]:
    """The exposition parsed back by prometheus_client, by family name."""
    return {family.name: family for family in text_string_to_metric_families(text.decode())}


class TestRouterFamilies:
    """A router snapshot becomes the catalogue's families."""

    def test_tokenizer_router_families(self) -> None:
        """Fabric, registry, pause and engine families, with the snapshot's values."""
        families = by_name(router_families(tokenizer_metrics()))
        assert set(families) == {
            "switchboard_messages",
            "switchboard_message_bytes",
            "switchboard_dropped_messages",
            "switchboard_rejected_frames",
            "switchboard_hop_latency_seconds",
            "switchboard_split_batch_rows",
            "switchboard_pause_barrier_seconds",
            "switchboard_router_backlog_messages",
            "switchboard_workers",
            "switchboard_worker_up",
            "switchboard_worker_last_heartbeat_timestamp_seconds",
            "switchboard_worker_in_flight_requests",
            "switchboard_paused",
            "switchboard_pause_state_since_timestamp_seconds",
            "switchboard_pause_operations",
            "switchboard_engine_up",
            "switchboard_engine_running_requests",
            "switchboard_engine_waiting_requests",
            "switchboard_engine_max_running_requests",
            "switchboard_engine_token_usage_ratio",
        }
        messages = families["switchboard_messages"]
        assert value(messages, "switchboard_messages_total", route="forward", worker="w0") == 3
        dropped = families["switchboard_dropped_messages"]
        labels = {"process": "tokenizer_router", "reason": "backlog_full"}
        assert value(dropped, "switchboard_dropped_messages_total", **labels) == 1
        up = families["switchboard_worker_up"]
        assert [(s.labels, s.value) for s in up.samples] == [({"worker": "w0"}, 1.0)]
        usage = families["switchboard_engine_token_usage_ratio"]
        assert value(usage, "switchboard_engine_token_usage_ratio") == 0.25
        operations = families["switchboard_pause_operations"]
        labels = {"operation": "pause", "mode": "abort", "result": "complete"}
        assert value(operations, "switchboard_pause_operations_total", **labels) == 1

    def test_histogram_buckets_are_spelt_like_prometheus_client(self) -> None:
        """Bounds read as prometheus_client writes them (5e-05, +Inf); count is the +Inf bucket."""
        hop = by_name(router_families(tokenizer_metrics()))["switchboard_hop_latency_seconds"]
        bounds = [s.labels["le"] for s in hop.samples if s.name.endswith("_bucket")]
        assert bounds[0] == "5e-05" and bounds[-1] == "+Inf"
        assert value(hop, "switchboard_hop_latency_seconds_count", route="forward") == 2
        inf = {"route": "forward", "le": "+Inf"}
        assert value(hop, "switchboard_hop_latency_seconds_bucket", **inf) == 2

    def test_detokenizer_addresses_become_worker_ids(self) -> None:
        """The detokenizer router's return addresses are reported as worker ids."""
        ids = worker_ids_by_address(tokenizer_metrics())
        families = by_name(router_families(detokenizer_metrics(), ids))
        messages = families["switchboard_messages"]
        assert value(messages, "switchboard_messages_total", route="detokenize", worker="w0") == 7
        assert "switchboard_workers" not in families and "switchboard_engine_up" not in families

    def test_unmapped_addresses_are_one_unknown_worker(self) -> None:
        """Addresses no registry row has are summed under worker "unknown", never kept
        as raw addresses (labels stay bounded and mean one thing)."""
        snapshot = detokenizer_snapshot()
        snapshot["traffic"] = [
            {"route": "detokenize", "worker": f"ipc:///gone/{i}", "messages": 1, "bytes": 10}
            for i in range(3)
        ]
        messages = by_name(router_families(detokenizer_metrics(snapshot), {}))[
            "switchboard_messages"
        ]
        assert (
            value(messages, "switchboard_messages_total", route="detokenize", worker="unknown") == 3
        )
        assert {s.labels["worker"] for s in messages.samples} == {"unknown"}

    def test_a_live_worker_wins_its_address(self) -> None:
        """When a departed worker and a live one had the same address, the live id is used."""
        snapshot = tokenizer_snapshot()
        address = "ipc:///run/worker-shared"
        snapshot["workers"] = [
            {**snapshot["workers"][0], "worker": "w9", "address": address, "up": 1},
            {**snapshot["workers"][0], "worker": "w1", "address": address, "up": 0},
        ]
        assert worker_ids_by_address(tokenizer_metrics(snapshot)) == {address: "w9"}

    def test_an_engine_without_a_load_reports_the_engine_down(self) -> None:
        """An engine that is not live, with no load report (the router's zeros), is
        switchboard_engine_up 0 with its load gauges at 0."""
        snapshot = tokenizer_snapshot()
        snapshot["engine"] = {
            "up": False,
            "running": 0,
            "waiting": 0,
            "max_running": 0,
            "token_usage": 0.0,
        }
        families = by_name(router_families(tokenizer_metrics(snapshot)))
        assert value(families["switchboard_engine_up"], "switchboard_engine_up") == 0
        running = families["switchboard_engine_running_requests"]
        assert value(running, "switchboard_engine_running_requests") == 0

    def test_an_unreadable_snapshot_raises(self) -> None:
        """A snapshot of another shape does not decode (the client answers it as a
        control error); the scrape then marks that router down."""
        snapshot = tokenizer_snapshot()
        del snapshot["traffic"]
        with pytest.raises(msgspec.ValidationError):
            tokenizer_metrics(snapshot)

    def test_buckets_must_end_at_infinity(self) -> None:
        """A histogram whose buckets stop short of +Inf is refused with ValueError."""
        snapshot = tokenizer_snapshot()
        snapshot["histograms"]["pause_barrier_seconds"] = {
            "pause": {"buckets": [[0.1, 1]], "sum": 0.05, "count": 1}
        }
        with pytest.raises(ValueError):
            router_families(tokenizer_metrics(snapshot))


class TestMerge:
    """Families of one name from several sources become one."""

    def test_one_family_per_name_and_equal_series_add(self) -> None:
        """Two sources' series of one family share a block; equal label sets add up."""
        first = CounterMetricFamily("switchboard_messages_total", "a", labels=["route", "worker"])
        first.add_metric(["forward", "w0"], 3)
        second = CounterMetricFamily("switchboard_messages_total", "b", labels=["route", "worker"])
        second.add_metric(["backward", "w0"], 5)
        second.add_metric(["forward", "w0"], 1)
        text = render(merge_families([[first], [second]]))
        assert text.count(b"# TYPE switchboard_messages_total counter") == 1
        family = parse(text)["switchboard_messages"]
        assert value(family, "switchboard_messages_total", route="forward", worker="w0") == 4
        assert value(family, "switchboard_messages_total", route="backward", worker="w0") == 5

    def test_a_type_clash_is_refused(self) -> None:
        """One name as a counter and a gauge is a catalogue bug, refused loudly."""
        counter = CounterMetricFamily("switchboard_x_total", "x", value=1)
        gauge = GaugeMetricFamily("switchboard_x", "x", value=1)
        with pytest.raises(ValueError, match="counter and a gauge"):
            merge_families([[counter], [gauge]])

    def test_families_without_samples_are_left_out(self) -> None:
        """An empty family (no drop ever counted) writes no HELP/TYPE lines."""
        empty = CounterMetricFamily("switchboard_dropped_messages_total", "d", labels=["reason"])
        up = router_up_family({"tokenizer_router": True})
        assert [family.name for family in merge_families([[empty, up]])] == [
            "switchboard_router_up"
        ]


_WORKER_SCRIPT = textwrap.dedent(
    """
    from switchboard.worker.metrics import worker_metrics
    metrics = worker_metrics("w0")
    assert metrics.enabled
    finished = metrics.http_started()
    metrics.http_finished(finished, "/generate", 200)
    metrics.http_started()  # still in flight when the process exits
    metrics.bad_request("invalid_prompt")
    timer = metrics.generation(4)
    timer.chunk(1, finished=False)
    timer.chunk(3, finished=True)
    metrics.backward_output(0.0002, 3, 500)
    metrics.backward_output(None, 1, 100)
    metrics.flush()
    """
)


def write_worker_metrics(directory: Path) -> int:
    """Run a worker's recorder in a child process writing into ``directory``; its pid."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    done = subprocess.run(
        [sys.executable, "-c", _WORKER_SCRIPT],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    pid_files = [path.stem.rpartition("_")[2] for path in directory.glob("counter_*.db")]
    assert len(pid_files) == 1, pid_files
    return int(pid_files[0])


class TestMultiprocess:
    """The workers' multiprocess files, aggregated and merged with the routers'."""

    def test_worker_series_merge_with_the_routers(self, tmp_path: Path) -> None:
        """The backward hop joins the routers' hop histogram; promtool accepts the whole."""
        write_worker_metrics(tmp_path)
        families = merge_families(
            [
                router_families(tokenizer_metrics()),
                router_families(detokenizer_metrics()),
                multiprocess_families(tmp_path),
            ]
        )
        text = render(families)
        assert text.count(b"# TYPE switchboard_hop_latency_seconds histogram") == 1
        parsed = parse(text)
        hop = parsed["switchboard_hop_latency_seconds"]
        routes = {s.labels["route"] for s in hop.samples}
        assert routes == {"forward", "detokenize", "backward"}
        requests = parsed["switchboard_http_requests"]
        labels = {"worker": "w0", "handler": "/generate", "status": "200"}
        assert value(requests, "switchboard_http_requests_total", **labels) == 1
        itl = parsed["switchboard_inter_token_latency_seconds"]
        assert value(itl, "switchboard_inter_token_latency_seconds_count", worker="w0") == 2
        tokens = parsed["switchboard_generation_tokens"]
        assert value(tokens, "switchboard_generation_tokens_total", worker="w0") == 3
        messages = parsed["switchboard_messages"]
        assert value(messages, "switchboard_messages_total", route="backward", worker="w0") == 2
        nbytes = parsed["switchboard_message_bytes"]
        assert (
            value(nbytes, "switchboard_message_bytes_total", route="backward", worker="w0") == 600
        )
        backward_hops = [s for s in hop.samples if s.labels.get("route") == "backward"]
        assert {s.value for s in backward_hops if s.name.endswith("_count")} == {1}
        promtool = Path("/usr/bin/promtool")
        if not promtool.exists():
            missing("promtool (apt-get install prometheus)")
        checked = subprocess.run(
            [str(promtool), "check", "metrics"], input=text, capture_output=True, check=False
        )
        assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()

    def test_a_retired_process_leaves_no_in_flight_series(self, tmp_path: Path) -> None:
        """A dead worker's in-flight gauge counts until retired, then is gone; its
        counters stay."""
        pid = write_worker_metrics(tmp_path)

        def in_flight() -> list[float]:
            families = by_name(multiprocess_families(tmp_path))
            gauge = families.get("switchboard_http_requests_in_flight")
            return [] if gauge is None else [s.value for s in gauge.samples]

        assert in_flight() == [1.0]
        MetricsDirectory(tmp_path).retire(pid)
        assert in_flight() == []
        requests = by_name(multiprocess_families(tmp_path))["switchboard_http_requests"]
        assert sum(s.value for s in requests.samples) == 1
