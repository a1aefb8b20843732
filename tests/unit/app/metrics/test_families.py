"""The admin app's ``/metrics``: router snapshots as the catalogue's families. Merging them
with the workers' multiprocess files is in ``test_exposition.py``; scrapes over real
control sockets in ``test_scrape.py``.

Snapshots are canned (the shape of the routers' ``metrics`` command).
"""

from __future__ import annotations

import msgspec
import pytest

from app.metrics.families import router_families, worker_ids_by_address
from tests.unit.app.metrics.snapshots import (
    by_name,
    detokenizer_metrics,
    detokenizer_snapshot,
    tokenizer_metrics,
    tokenizer_snapshot,
    value,
)


class TestRouterFamilies:
    """A router snapshot becomes the catalogue's families."""

    def test_a_routers_cpu_and_memory_are_its_childs(self) -> None:
        """CPU seconds and resident memory are labelled with the router's process and its
        child's name in the supervisor; a snapshot without them (0 and 0) gives neither."""
        snapshot = tokenizer_snapshot() | {"cpu_seconds": 1.5, "resident_bytes": 64 << 20}
        families = by_name(router_families(tokenizer_metrics(snapshot)))
        labels = {"process": "tokenizer_router", "child": "router"}
        cpu = families["switchboard_process_cpu_seconds"]
        assert value(cpu, "switchboard_process_cpu_seconds_total", **labels) == 1.5
        memory = families["switchboard_process_resident_memory_bytes"]
        assert value(memory, "switchboard_process_resident_memory_bytes", **labels) == 64 << 20
        detok = detokenizer_snapshot() | {"cpu_seconds": 0.5, "resident_bytes": 1}
        families = by_name(router_families(detokenizer_metrics(detok)))
        cpu = families["switchboard_process_cpu_seconds"]
        assert cpu.samples[0].labels == {"process": "detokenizer_router", "child": "detok-router"}
        assert "switchboard_process_cpu_seconds" not in by_name(
            router_families(tokenizer_metrics())
        )

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
        assert [(s.labels, s.value) for s in up.samples] == [
            ({"worker": "w0", "host": "gpu-a"}, 1.0)
        ]
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

    def test_no_engine_load_reports_the_engine_down(self) -> None:
        """Without a load snapshot only switchboard_engine_up is reported, at 0."""
        snapshot = tokenizer_snapshot()
        snapshot["engine"] = None
        families = by_name(router_families(tokenizer_metrics(snapshot)))
        assert value(families["switchboard_engine_up"], "switchboard_engine_up") == 0
        assert "switchboard_engine_running_requests" not in families

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
