"""Tests for the detokenizer's backward-route counters (prometheus_client multiprocess mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from switchboard.detokenizer.metrics import BackwardTraffic, worker_label


class TestWorkerLabel:
    """worker_label names a worker by its id where the address is the default one."""

    def test_default_address(self) -> None:
        """ipc://<run dir>/worker-<id> gives <id>."""
        assert worker_label("ipc:///run/sb/worker-w0") == "w0"

    def test_other_addresses_are_kept(self) -> None:
        """A custom address (tcp, another file name) is its own label."""
        assert worker_label("tcp://127.0.0.1:5000") == "tcp://127.0.0.1:5000"
        assert worker_label("ipc:///run/sb/worker-") == "ipc:///run/sb/worker-"
        assert worker_label("ipc:///run/sb/front") == "ipc:///run/sb/front"


class TestBackwardTraffic:
    """Counted into the multiprocess directory only when one is configured."""

    def test_no_directory_records_nothing(self) -> None:
        """Without PROMETHEUS_MULTIPROC_DIR the recorder is a no-op."""
        traffic = BackwardTraffic.from_environment({})
        traffic.record("ipc:///run/sb/worker-w0", [b"header", b"row"])
        assert not traffic.recording

    def test_counts_messages_and_bytes_per_worker(self, tmp_path: Path) -> None:
        """A process with the directory set writes messages and bytes per worker."""
        code = (
            "from switchboard.detokenizer.metrics import BackwardTraffic\n"
            "traffic = BackwardTraffic.from_environment()\n"
            "assert traffic.recording\n"
            "traffic.record('ipc:///run/sb/worker-w0', [b'12345', b'678'])\n"
            "traffic.record('ipc:///run/sb/worker-w0', [b'12'])\n"
            "traffic.record('ipc:///run/sb/worker-w1', [b'1'])\n"
        )
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(tmp_path))
        samples = {
            (sample.name, sample.labels["route"], sample.labels["worker"]): sample.value
            for family in registry.collect()
            for sample in family.samples
        }
        assert samples == {
            ("switchboard_messages_total", "backward", "w0"): 2.0,
            ("switchboard_messages_total", "backward", "w1"): 1.0,
            ("switchboard_message_bytes_total", "backward", "w0"): 10.0,
            ("switchboard_message_bytes_total", "backward", "w1"): 1.0,
        }
