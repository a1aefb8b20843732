"""The stack's history for the console's chart: samples computed from two reads of every
worker's totals, kept in a bounded ring oldest first; the sampler feeding it from real
files; ``GET /api/history``."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.core import CounterMetricFamily

from app.main import create_app
from app.settings import AdminSettings
from app.stack_history import StackHistory, generation_tokens
from app.stats_sampler import WorkerStatsSampler
from app.worker_stats import WorkerTotals
from tests.unit.app.metrics.worker_files import write_worker_metrics

INF = math.inf
VIEWER = "view-token-123"


def totals(requests: float, under_1s: float, count: float) -> WorkerTotals:
    """A worker's totals: ``count`` generations, ``under_1s`` of them within a second."""
    return WorkerTotals(
        requests=requests, buckets=((1.0, under_1s), (INF, count)), latency_count=count
    )


class TestSamples:
    def test_the_first_read_makes_no_sample(self) -> None:
        """A rate needs two reads: the first one only starts the history."""
        history = StackHistory(10)
        assert history.observe(0.0, 1000.0, {"w0": totals(5, 1, 1)}, {"w0": 10}) is None
        assert history.samples() == []

    def test_rates_and_latency_are_of_the_stack_between_two_reads(self) -> None:
        """Requests and tokens per second are summed over the workers and divided by the
        monotonic interval; p50 and p95 come from their buckets summed."""
        history = StackHistory(10)
        history.observe(0.0, 1000.0, {"w0": totals(100, 10, 10), "w1": totals(50, 0, 0)}, {})
        # 20 + 10 requests in 5 s; 8 generations within 1 s, 2 past every bound.
        sample = history.observe(
            5.0,
            1005.2,
            {"w0": totals(120, 16, 16), "w1": totals(60, 2, 4)},
            {"w0": 300.0, "w1": 200.0},
        )
        assert sample is not None and history.samples() == [sample]
        assert (sample.at, sample.interval_s) == (1005.2, 5.0)
        assert sample.requests_per_s == 6.0
        assert sample.tokens_per_s == 100.0
        assert sample.generations == 10
        assert sample.latency_p50_s == pytest.approx(5 / 8)
        assert sample.latency_p95_s == 1.0

    def test_a_quiet_interval_has_zero_rates_and_no_latency(self) -> None:
        """Nothing happened: zero rates, and None where there is no generation to rank."""
        history = StackHistory(10)
        same = {"w0": totals(5, 1, 1)}
        history.observe(0.0, 1000.0, same, {"w0": 7.0})
        sample = history.observe(5.0, 1005.0, same, {"w0": 7.0})
        assert sample is not None
        assert (sample.requests_per_s, sample.tokens_per_s, sample.generations) == (0.0, 0.0, 0)
        assert (sample.latency_p50_s, sample.latency_p95_s) == (None, None)

    def test_a_restarted_worker_counts_from_zero_and_a_new_one_in_full(self) -> None:
        """Totals that went down are all new; a worker first seen is counted from zero."""
        history = StackHistory(10)
        history.observe(0.0, 1000.0, {"w0": totals(100, 10, 10)}, {"w0": 500.0})
        sample = history.observe(
            2.0, 1002.0, {"w0": totals(4, 2, 2), "w1": totals(6, 0, 0)}, {"w0": 20.0, "w1": 10.0}
        )
        assert sample is not None
        assert (sample.requests_per_s, sample.tokens_per_s, sample.generations) == (5.0, 15.0, 2)

    def test_no_time_between_reads_makes_no_sample(self) -> None:
        """Two reads at the same monotonic time cannot give a rate."""
        history = StackHistory(10)
        history.observe(3.0, 1000.0, {}, {})
        assert history.observe(3.0, 1000.0, {}, {}) is None
        assert history.samples() == []


class TestRing:
    def test_bounded_oldest_first(self) -> None:
        """However many reads, at most ``capacity`` samples, the newest kept, oldest first."""
        history = StackHistory(3)
        for second in range(50):
            history.observe(float(second), 1000.0 + second, {"w0": totals(second, 0, 0)}, {})
        stamps = [sample.at for sample in history.samples()]
        assert stamps == [1047.0, 1048.0, 1049.0]

    def test_after_gives_only_later_samples(self) -> None:
        """``after`` leaves out every sample stamped at or before it."""
        history = StackHistory(10)
        for second in range(5):
            history.observe(float(second), 1000.0 + second, {}, {})
        assert [sample.at for sample in history.samples(after=1002.0)] == [1003.0, 1004.0]
        assert history.samples(after=1004.0) == []

    def test_capacity_must_be_positive(self) -> None:
        """A ring of no samples is refused."""
        with pytest.raises(ValueError):
            StackHistory(0)

    def test_the_sampler_keeps_fifteen_minutes_of_its_interval(self) -> None:
        """By default: 15 minutes at 5 s is 180 samples."""
        assert WorkerStatsSampler(None).history.capacity == 180
        assert WorkerStatsSampler(None, interval_s=2.0, history_s=60.0).history.capacity == 30


class TestTokens:
    def test_generated_tokens_by_worker(self) -> None:
        """``switchboard_generation_tokens_total`` by worker; other families ignored."""
        generated = CounterMetricFamily("switchboard_generation_tokens", "t", labels=["worker"])
        generated.add_metric(["w0"], 12)
        generated.add_metric(["w1"], 3)
        prompt = CounterMetricFamily("switchboard_prompt_tokens", "p", labels=["worker"])
        prompt.add_metric(["w0"], 99)
        assert generation_tokens([generated, prompt]) == {"w0": 12.0, "w1": 3.0}


class TestSampler:
    def test_two_reads_of_real_files_make_a_sample(self, tmp_path: Path) -> None:
        """An empty directory, then a real worker recorder's files: one sample with its
        request, its generated tokens and its generation's latency."""
        sampler = WorkerStatsSampler(tmp_path)
        asyncio.run(sampler.sample_once())
        write_worker_metrics(tmp_path)
        asyncio.run(sampler.sample_once())
        page = sampler.history_page()
        assert page.available and page.interval_s == 5.0 and page.capacity == 180
        (sample,) = page.samples
        assert sample.requests_per_s > 0 and sample.tokens_per_s > 0
        assert sample.generations == 1 and sample.latency_p50_s is not None

    def test_without_a_directory_nothing_is_available(self) -> None:
        """No metrics directory: available false and no samples."""
        page = WorkerStatsSampler(None).history_page()
        assert page.available is False and page.samples == []


class TestRoute:
    def test_a_viewer_reads_the_history_while_no_router_answers(self, tmp_path: Path) -> None:
        """``GET /api/history`` answers a viewer every sample, or those after ``?after=``;
        no token is 401, an ``after`` that is no number 400."""
        settings = AdminSettings(
            control_endpoint=f"ipc://{tmp_path}/router-control",
            control_timeout_s=0.2,
            viewer_tokens=f"viewer:{VIEWER}",  # type: ignore[arg-type]
            metrics_dir=tmp_path,
        )
        app = create_app(settings)
        sampler: WorkerStatsSampler = app.state.worker_stats
        for second in range(3):
            sampler.history.observe(
                float(second), 1000.0 + second, {"w0": totals(second, 0, 0)}, {}
            )
        headers = {"Authorization": f"Bearer {VIEWER}"}
        with TestClient(app) as client:
            answer = client.get("/api/history", headers=headers)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert body["available"] is True
            assert [sample["at"] for sample in body["samples"]][:2] == [1001.0, 1002.0]
            later = client.get("/api/history", params={"after": 1001.0}, headers=headers)
            assert later.json()["samples"][0]["at"] == 1002.0
            assert client.get("/api/history").status_code == 401
            bad = client.get("/api/history", params={"after": "soon"}, headers=headers)
            assert bad.status_code == 400
