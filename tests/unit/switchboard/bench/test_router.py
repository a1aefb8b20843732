"""Smoke tests of ``switchboard bench router``: every measurement runs at a tiny size.

No timing is asserted (these machines are noisy). Each test proves that a measurement
delivers every message it sends, reports the documented structure, and leaves no child
process and no temporary directory behind.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from router_core.wire import Kind, decode_payload, split_rows
from router_core.wire.outputs import BatchStrOutput
from router_core.wire.requests import GenerateRequest
from switchboard.bench import naive
from switchboard.bench import router as bench_router
from switchboard.bench.backward import IMPLS, SplitRun, measure_split
from switchboard.bench.batches import SplitPlan
from switchboard.bench.forward import PATHS, HopRun, generate_payload, measure_forward
from switchboard.bench.report import render, summarize
from switchboard.bench.router import BenchPlan, run_router_bench, run_suite

TINY_PLAN = BenchPlan(
    repeats=1,
    forward_messages={1024: 300},
    split_requests={64: 128},
    logprobs_batch=64,
)

WORKERS = tuple(f"ipc:///tmp/sb-test/worker-{i}" for i in range(4))


@pytest.fixture
def clean_root() -> Iterator[Path]:
    """A root for trial directories; afterwards it must be empty and no child left.

    Made under the system temp dir, not pytest's ``tmp_path``: socket paths in it must
    stay within the 107 bytes of ``sun_path``.
    """
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    root = Path(tempfile.mkdtemp(prefix="sbt-"))
    try:
        yield root
        assert list(root.iterdir()) == []
        after = {child.pid for child in psutil.Process().children(recursive=True)}
        assert after <= before
    finally:
        shutil.rmtree(root, ignore_errors=True)


class TestForward:
    @pytest.mark.parametrize("path", PATHS)
    def test_delivers_every_message(self, path: str, clean_root: Path) -> None:
        """Each path delivers all timed messages intact and reports a positive rate."""
        run = measure_forward(path, 1024, 300, root=clean_root)  # type: ignore[arg-type]
        assert isinstance(run, HopRun)
        assert (run.path, run.size, run.sent) == (path, 1024, 300)
        assert run.delivered == run.sent
        assert run.malformed == 0
        assert run.complete
        assert run.seconds > 0
        assert run.rate > 0
        assert run.router_losses == {}

    @pytest.mark.parametrize("size", [64, 1024, 16384])
    def test_payload_is_a_generate_request_of_exact_size(self, size: int) -> None:
        """The forward payload is a real GenerateRequest of exactly the nominal size."""
        payload = generate_payload(size)
        assert len(payload) == size
        assert isinstance(decode_payload(Kind.GENERATE, payload), GenerateRequest)


class TestSplit:
    @pytest.mark.parametrize("logprobs", [False, True])
    @pytest.mark.parametrize("impl", IMPLS)
    def test_delivers_every_request_to_its_owner(
        self, impl: str, logprobs: bool, clean_root: Path
    ) -> None:
        """Both designs deliver every request of every batch to its owning worker."""
        run = measure_split(impl, 8, 200, logprobs=logprobs, root=clean_root)  # type: ignore[arg-type]
        assert isinstance(run, SplitRun)
        assert (run.impl, run.batch_size, run.logprobs, run.sent) == (impl, 8, logprobs, 200)
        assert run.delivered == run.sent
        assert run.misrouted == 0
        assert run.complete
        assert 0 < run.counted < run.delivered
        assert run.rate > 0
        assert run.router_losses == {}

    def test_rounds_requests_up_to_whole_batches(self, clean_root: Path) -> None:
        """A request count that is not a multiple of the batch size sends whole batches."""
        run = measure_split("switchboard", 64, 100, root=clean_root)
        assert run.sent == 128
        assert run.delivered == 128


class TestPlan:
    def test_rows_spread_evenly_over_workers(self) -> None:
        """Round-robin ownership gives every worker the same share, even for B=1."""
        for batch_size in (1, 8, 64):
            plan = SplitPlan(batch_size, 16, WORKERS)
            counts = plan.expected_rows()
            assert sum(counts.values()) == plan.requests
            assert len(set(counts.values())) == 1

    def test_batches_name_their_owners(self) -> None:
        """Every row's http_worker_ipcs entry is the owner the plan assigns."""
        plan = SplitPlan(8, 3, WORKERS, logprobs=True)
        for distinct, batch in enumerate(plan.build()):
            assert batch.http_worker_ipcs == [plan.owner(distinct, row) for row in range(8)]
            assert batch.output_top_logprobs_val is not None


class TestNaiveModel:
    def test_field_copy_carries_the_same_content_as_the_generic_split(self) -> None:
        """The baseline's per-request objects hold what Switchboard's rows hold."""
        batch = SplitPlan(8, 1, WORKERS, logprobs=True).build()[0]
        column = naive.to_naive(batch)
        for index, row in enumerate(split_rows(batch)):
            one = naive.handle_output_by_index(column, index)
            for name, value in row.items():
                assert getattr(one, name) == value, name

    def test_per_request_object_survives_pickle(self) -> None:
        """A per-request object pickles and unpickles to an equal object."""
        batch = SplitPlan(4, 1, WORKERS).build()[0]
        one = naive.handle_output_by_index(naive.to_naive(batch), 2)
        assert naive.loads(naive.dumps(one)) == one

    def test_dataclass_has_every_output_field(self) -> None:
        """The baseline's dataclass has exactly BatchStrOutput's fields."""
        fields = set(naive.NaiveBatchStrOutput.__dataclass_fields__)
        assert fields == set(BatchStrOutput.__struct_fields__)


class TestReport:
    def test_incomplete_runs_are_left_out_and_flagged(self) -> None:
        """A run that lost messages is excluded from the medians and named in the report."""
        runs = [
            HopRun("proxy", 1024, 10, 10, 0, 1.0),
            HopRun("switchboard", 1024, 10, 10, 0, 2.0),
            HopRun("switchboard", 1024, 10, 7, 0, 0.1),
        ]
        doc = summarize(runs, [], machine=_machine(), plan={"repeats": 2}, elapsed_s=1.0)
        assert doc["forward"]["medians"]["switchboard"]["1024"] == pytest.approx(4.5)
        assert doc["forward_1k_vs_proxy"] == pytest.approx(0.5)
        assert doc["targets"]["forward_1k_vs_proxy"]["verdict"] == "BELOW"
        assert doc["split_b64_vs_naive"] is None
        assert "INCOMPLETE" in render(doc)


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


def _machine() -> dict[str, object]:
    return {
        "cpu_count": 2,
        "load_average_at_start": [0.0, 0.0, 0.0],
        "pyzmq": "x",
        "libzmq": "y",
    }
