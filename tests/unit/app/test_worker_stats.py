"""Each worker's errors and latency over a window, computed from its metric families
without sockets; the sampler over real multiprocess files; ``GET /api/worker_stats``."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from app.main import create_app
from app.settings import AdminSettings
from app.stats_sampler import WorkerStatsSampler
from app.worker_stats import (
    StatsWindow,
    WorkerTotals,
    quantile,
    stats_between,
    worker_totals,
)
from tests.unit.app.metrics.worker_files import write_worker_metrics

INF = math.inf


def families(
    answered: dict[tuple[str, str, str], float],
    latency: dict[str, tuple[list[tuple[str, float]], float]],
) -> list[Metric]:
    """A requests counter by (worker, handler, status) and a latency histogram by worker
    (cumulative buckets, sum), as the multiprocess aggregate gives them."""
    requests = CounterMetricFamily(
        "switchboard_http_requests_total", "r", labels=["worker", "handler", "status"]
    )
    for labels, value in answered.items():
        requests.add_metric(list(labels), value)
    e2e = HistogramMetricFamily("switchboard_e2e_request_latency_seconds", "l", labels=["worker"])
    for worker, (buckets, total) in latency.items():
        e2e.add_metric([worker], buckets, total)
    return [requests, e2e]


class TestTotals:
    def test_requests_errors_and_refusals_by_worker_without_probes(self) -> None:
        """5xx are errors, 4xx refusals; /health probes count for nothing."""
        totals = worker_totals(
            families(
                {
                    ("w0", "/generate", "200"): 7,
                    ("w0", "/generate", "503"): 2,
                    ("w0", "/v1/completions", "400"): 1,
                    ("w0", "/health", "503"): 40,
                    ("w1", "/generate", "200"): 3,
                },
                {"w0": ([("0.5", 4), ("1.0", 6), ("+Inf", 7)], 3.5)},
            )
        )
        assert list(totals) == ["w0", "w1"]
        w0 = totals["w0"]
        assert (w0.requests, w0.errors, w0.refused) == (10, 2, 1)
        assert w0.buckets == ((0.5, 4), (1.0, 6), (INF, 7))
        assert (w0.latency_sum, w0.latency_count) == (3.5, 7)
        assert (totals["w1"].requests, totals["w1"].latency_count) == (3, 0)


class TestQuantile:
    def test_linear_within_a_bucket(self) -> None:
        """As histogram_quantile: 10 observations, 4 up to 0.1, 8 up to 0.5, 10 up to 1."""
        buckets = ((0.1, 4.0), (0.5, 8.0), (1.0, 10.0), (INF, 10.0))
        assert quantile(0.5, buckets) == pytest.approx(0.1 + 0.4 * 1 / 4)
        assert quantile(0.95, buckets) == pytest.approx(0.5 + 0.5 * 1.5 / 2)
        assert quantile(0.2, buckets) == pytest.approx(0.05)

    def test_the_inf_bucket_gives_the_highest_finite_bound(self) -> None:
        """Observations past every bound are reported at the last finite bound."""
        assert quantile(0.95, ((0.1, 1.0), (1.0, 1.0), (INF, 10.0))) == 1.0

    def test_no_observations(self) -> None:
        """Empty or all-zero buckets have no quantile."""
        assert quantile(0.5, ()) is None
        assert quantile(0.5, ((1.0, 0.0), (INF, 0.0))) is None


def totals(
    requests: float, errors: float, under_1s: float, count: float, total: float
) -> WorkerTotals:
    return WorkerTotals(
        requests=requests,
        errors=errors,
        buckets=((1.0, under_1s), (INF, count)),
        latency_sum=total,
        latency_count=count,
    )


class TestBetween:
    def test_the_difference_of_two_samples(self) -> None:
        """Counts, ratio, mean and quantiles are of what happened between the samples."""
        # 10 generations in between, 8 of them within 1 s and 2 past every bound.
        stats = stats_between(totals(100, 10, 50, 60, 30.0), totals(120, 15, 58, 70, 36.0))
        assert (stats.requests, stats.errors, stats.generations) == (20, 5, 10)
        assert stats.error_ratio == 0.25
        assert stats.latency_mean_s == pytest.approx(0.6)
        assert stats.latency_p50_s == pytest.approx(5 / 8)
        assert stats.latency_p95_s == 1.0

    def test_a_quiet_window_has_no_ratio_or_latency(self) -> None:
        """Nothing happened: zeros, and None where a ratio would divide by zero."""
        same = totals(5, 1, 2, 3, 1.0)
        stats = stats_between(same, same)
        assert (stats.requests, stats.errors, stats.error_ratio) == (0, 0, None)
        assert (stats.latency_mean_s, stats.latency_p50_s, stats.latency_p95_s) == (None,) * 3

    def test_totals_that_went_down_count_from_zero(self) -> None:
        """A worker whose metrics restarted is counted from its new totals."""
        stats = stats_between(totals(100, 10, 50, 60, 30.0), totals(4, 1, 2, 2, 0.5))
        assert (stats.requests, stats.errors, stats.generations) == (4, 1, 2)


class TestWindow:
    def test_one_sample_is_the_whole_life_then_the_window(self) -> None:
        """With one sample the figures are the totals (covered None); later ones are the
        difference to the newest sample at least window_s old."""
        window = StatsWindow(60.0)
        assert window.page().workers == {}
        window.observe(0.0, {"w0": totals(10, 1, 1, 1, 0.1)})
        first = window.page()
        assert first.covered_s is None and first.workers["w0"].requests == 10
        window.observe(30.0, {"w0": totals(20, 1, 1, 1, 0.1)})
        assert (window.page().covered_s, window.page().workers["w0"].requests) == (30.0, 10)
        window.observe(65.0, {"w0": totals(25, 3, 1, 1, 0.1)})
        window.observe(95.0, {"w0": totals(26, 3, 1, 1, 0.1), "w1": totals(2, 0, 0, 0, 0.0)})
        page = window.page()
        assert page.covered_s == 65.0  # from the sample at 30 s, the newest >= 60 s old
        assert (page.workers["w0"].requests, page.workers["w0"].errors) == (6, 2)
        assert page.workers["w1"].requests == 2  # new in the window: all of it

    def test_a_window_must_be_positive(self) -> None:
        with pytest.raises(ValueError):
            StatsWindow(0.0)


class TestSampler:
    def test_reads_a_workers_real_files(self, tmp_path: Path) -> None:
        """A real worker recorder's files give its requests and one generation."""
        write_worker_metrics(tmp_path)
        sampler = WorkerStatsSampler(tmp_path)
        asyncio.run(sampler.sample_once())
        page = sampler.page()
        assert page.available and page.covered_s is None
        w0 = page.workers["w0"]
        assert (w0.requests, w0.errors, w0.generations) == (1, 0, 1)
        assert w0.latency_mean_s is not None and w0.latency_p50_s is not None

    def test_an_empty_directory_is_zeros_and_a_failed_read_no_sample(self, tmp_path: Path) -> None:
        """Before any worker wrote a file the sample is zeros, so what they count next is
        in the window; a read that fails adds no sample at all."""
        sampler = WorkerStatsSampler(tmp_path)
        asyncio.run(sampler.sample_once())
        write_worker_metrics(tmp_path)
        asyncio.run(sampler.sample_once())
        page = sampler.page()
        assert page.covered_s is not None and page.workers["w0"].requests == 1
        for path in tmp_path.glob("*.db"):
            path.write_bytes(b"not a metrics file")
        asyncio.run(sampler.sample_once())
        assert sampler.page() == page

    def test_without_a_directory_nothing_is_available(self) -> None:
        """No metrics directory: the page says so and the loop ends at once."""
        sampler = WorkerStatsSampler(None)
        asyncio.run(sampler.run())
        assert sampler.page().available is False and sampler.page().workers == {}

    def test_the_route_answers_a_viewer(self, tmp_path: Path) -> None:
        """``GET /api/worker_stats`` with a viewer's token, while no router answers."""
        settings = AdminSettings(
            control_endpoint=f"ipc://{tmp_path}/router-control",
            control_timeout_s=0.2,
            viewer_tokens="viewer:view-token-123",  # type: ignore[arg-type]
        )
        with TestClient(create_app(settings)) as client:
            answer = client.get(
                "/api/worker_stats", headers={"Authorization": "Bearer view-token-123"}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["available"] is False
            assert client.get("/api/worker_stats").status_code == 401
