"""The admin app's ``/metrics`` exposition: families of one name merged, and the workers'
multiprocess files aggregated and merged with the routers' families.

Snapshots are canned (the shape of the routers' ``metrics`` command); the multiprocess
files are written by a real worker recorder in a child process, as under ``switchboard up``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from app.metrics.exposition import merge_families, multiprocess_families, render
from app.metrics.families import router_families, router_up_family
from httpkit.limits import REFUSAL_STATUSES
from switchboard.supervisor.metrics_dir import MetricsDirectory
from tests.integration.harness.polling import missing
from tests.unit.app.metrics.snapshots import (
    by_name,
    detokenizer_metrics,
    parse,
    tokenizer_metrics,
    value,
)
from tests.unit.app.metrics.worker_files import write_worker_metrics


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
        refusals = parsed["switchboard_http_refusals"]
        refused = {
            s.labels["reason"]: s.value for s in refusals.samples if s.name.endswith("_total")
        }
        assert refused == dict.fromkeys(REFUSAL_STATUSES, 0.0) | {"header_too_large": 1.0}
        child = {"process": "worker", "child": "worker-w0"}
        cpu = parsed["switchboard_process_cpu_seconds"]
        assert value(cpu, "switchboard_process_cpu_seconds_total", **child) > 0
        memory = parsed["switchboard_process_resident_memory_bytes"]
        assert value(memory, "switchboard_process_resident_memory_bytes", **child) > 2**20
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
        memory = "switchboard_process_resident_memory_bytes"
        assert memory in by_name(multiprocess_families(tmp_path))
        MetricsDirectory(tmp_path).retire(pid)
        assert in_flight() == []
        assert memory not in by_name(multiprocess_families(tmp_path)), "a dead child's memory"
        assert "switchboard_process_cpu_seconds" in by_name(multiprocess_families(tmp_path))
        requests = by_name(multiprocess_families(tmp_path))["switchboard_http_requests"]
        assert sum(s.value for s in requests.samples) == 1
