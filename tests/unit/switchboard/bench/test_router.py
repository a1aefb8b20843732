"""Smoke tests of ``switchboard bench router`` (switchboard.bench.router): the whole suite
and the command, at a tiny size.

No timing is asserted (these machines are noisy): each measurement delivers every message
it sends and leaves no child process and no temporary directory behind (the ``clean_root``
fixture of the bench conftest).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from switchboard.bench import router as bench_router
from switchboard.bench.forward import PATHS
from switchboard.bench.router import BenchPlan, run_router_bench, run_suite

TINY_PLAN = BenchPlan(
    repeats=1,
    forward_messages={1024: 300},
    split_requests={64: 128},
    logprobs_batch=64,
)


class TestSuite:
    def test_tiny_suite_reports_every_key(self, clean_root: Path) -> None:
        """A one-repetition suite produces the headline ratios, medians and machine facts."""
        doc = run_suite(TINY_PLAN, root=clean_root)
        json.dumps(doc)
        assert doc["forward_1k_vs_proxy"] > 0
        assert doc["split_b64_vs_naive"] > 0
        assert set(doc["forward"]["medians"]) == set(PATHS)
        assert set(doc["split"]["medians"]["switchboard"]) == {"64", "64+logprobs"}
        assert {"cpu_count", "pyzmq", "libzmq"} <= set(doc["machine"])
        assert all(run["complete"] for run in doc["forward"]["runs"] + doc["split"]["runs"])
        for target in doc["targets"].values():
            assert target["verdict"] in {"PASS", "BELOW"}

    def test_command_writes_json_and_exits_zero(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``run_router_bench`` prints the table, writes the JSON and returns 0."""
        monkeypatch.setattr(bench_router, "QUICK", TINY_PLAN)
        out = tmp_path / "bench.json"
        assert run_router_bench(quick=True, json_path=str(out)) == 0
        doc = json.loads(out.read_text())
        assert {"forward_1k_vs_proxy", "split_b64_vs_naive", "machine"} <= set(doc)
        printed = capsys.readouterr().out
        assert "switchboard / zmq.proxy" in printed
        assert "PASS" in printed or "BELOW" in printed
