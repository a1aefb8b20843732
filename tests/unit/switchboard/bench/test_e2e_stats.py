"""Tests for the arithmetic of ``switchboard bench e2e`` (switchboard.bench.e2e_stats):
percentiles, window summaries, process roles and CPU shares, with made-up numbers (no
timing is asserted: these machines are noisy)."""

from __future__ import annotations

import pytest

from switchboard.bench.e2e_stats import (
    CpuSample,
    RequestRecord,
    cpu_by_role,
    cpu_per_process,
    percentile,
    role_of,
    routing_share,
    summarize_window,
)

PY = "/venv/bin/python3"


class TestPercentile:
    def test_interpolates_between_closest_ranks(self) -> None:
        """p50 of an even count is the mean of the middle two; p0 and p100 are the ends."""
        values = [4.0, 1.0, 3.0, 2.0]
        assert percentile(values, 50) == pytest.approx(2.5)
        assert percentile(values, 0) == 1.0
        assert percentile(values, 100) == 4.0
        assert percentile(values, 99) == pytest.approx(3.97)

    def test_one_value_and_none(self) -> None:
        """A single value is every percentile; no values give None."""
        assert percentile([7.0], 99) == 7.0
        assert percentile([], 50) is None

    def test_rejects_out_of_range(self) -> None:
        """A percentile outside 0..100 is a programming error."""
        with pytest.raises(ValueError, match="within"):
            percentile([1.0], 101)


class TestWindow:
    def test_counts_requests_where_they_finish(self) -> None:
        """Only requests finishing inside the window count; rates divide by its length."""
        records = [
            RequestRecord(0.0, 0.1, 0.9, 10),  # warm-up: before the window
            RequestRecord(0.5, 0.6, 1.5, 10),
            RequestRecord(1.0, 1.2, 2.0, 20),
            RequestRecord(2.0, 2.1, 3.5, 30),  # after the window
        ]
        summary = summarize_window(records, 1.0, 3.0)
        assert summary.requests == 2
        assert summary.requests_per_s == pytest.approx(1.0)
        assert summary.output_tokens_per_s == pytest.approx(15.0)
        assert summary.ttft_p50_s == pytest.approx(0.15)
        assert summary.e2e_p50_s == pytest.approx(1.0)
        assert summary.errors_total == 0

    def test_errors_are_counted_everywhere_and_sampled(self) -> None:
        """Failed requests count in the total wherever they end, and are never throughput."""
        records = [
            RequestRecord(0.0, None, 0.5, 0, "ConnectionRefusedError: x"),
            RequestRecord(1.0, 1.1, 1.5, 0, "StreamError: y"),
            RequestRecord(1.0, 1.1, 1.6, 0, "StreamError: y"),
            RequestRecord(1.0, 1.1, 2.0, 5),
        ]
        summary = summarize_window(records, 1.0, 3.0)
        assert (summary.requests, summary.errors_in_window, summary.errors_total) == (1, 2, 3)
        assert summary.error_samples == ("ConnectionRefusedError: x", "StreamError: y")

    def test_empty_window_has_no_latencies(self) -> None:
        """A window without finished requests reports zero rates and no percentiles."""
        summary = summarize_window([], 0.0, 1.0)
        assert (summary.requests_per_s, summary.ttft_p99_s, summary.e2e_p50_s) == (0.0, None, None)


class TestRoles:
    @pytest.mark.parametrize(
        ("argv", "role"),
        [
            ([PY, "-m", "switchboard.cli", "up", "--workers", "2"], "supervisor"),
            ([PY, "/venv/bin/switchboard", "up"], "supervisor"),
            ([PY, "-m", "switchboard.cli", "router", "--run-dir", "/r"], "router"),
            ([PY, "-m", "switchboard.cli", "detok-router", "--detokenizers", "2"], "detok-router"),
            (
                [PY, "-m", "switchboard.cli", "detokenizer", "--outputs-via", "router"],
                "detokenizer",
            ),
            ([PY, "-m", "switchboard.cli", "engine", "--outputs-via", "detokenizers"], "engine"),
            ([PY, "-m", "switchboard.cli", "worker", "--worker-id", "w0"], "worker"),
            ([PY, "-c", "from multiprocessing import resource_tracker"], "other"),
            (["worker"], "other"),
        ],
    )
    def test_role_is_the_subcommand(self, argv: list[str], role: str) -> None:
        """The first argument naming a subcommand decides, not a flag value after it."""
        assert role_of(argv) == role


class TestCpuShare:
    def test_sums_deltas_per_role(self) -> None:
        """Each role gets the CPU its processes used between the samples."""
        before = {
            1: CpuSample("router", 1.0),
            2: CpuSample("worker", 10.0),
            3: CpuSample("worker", 20.0),
            4: CpuSample("detok-router", 0.5),
        }
        after = {
            1: CpuSample("router", 1.5),
            2: CpuSample("worker", 13.0),
            3: CpuSample("worker", 24.0),
            4: CpuSample("detok-router", 1.0),
        }
        used, unmatched = cpu_by_role(before, after)
        assert used == pytest.approx({"router": 0.5, "worker": 7.0, "detok-router": 0.5})
        assert unmatched == []
        assert routing_share(used) == pytest.approx(1.0 / 8.0)

    def test_processes_in_one_sample_only_are_flagged_not_counted(self) -> None:
        """A process that died or appeared mid-window is reported, its CPU left out."""
        before = {1: CpuSample("router", 1.0), 2: CpuSample("worker", 5.0)}
        after = {1: CpuSample("router", 2.0), 3: CpuSample("worker", 0.2)}
        used, unmatched = cpu_by_role(before, after)
        assert used == {"router": 1.0}
        assert unmatched == [2, 3]

    def test_per_process_split_is_sorted_busiest_first(self) -> None:
        """Each process of a role is listed on its own, so a lopsided split shows."""
        before = {1: CpuSample("detokenizer", 1.0), 2: CpuSample("detokenizer", 1.0)}
        after = {1: CpuSample("detokenizer", 1.0), 2: CpuSample("detokenizer", 4.0)}
        assert cpu_per_process(before, after) == {"detokenizer": [3.0, 0.0]}

    def test_no_cpu_means_no_share(self) -> None:
        """Without any CPU used the share is unknown, not zero."""
        assert routing_share({}) is None
        assert routing_share({"router": 0.0, "worker": 0.0}) is None
