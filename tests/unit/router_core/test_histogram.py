"""Tests for the fixed-bucket histograms routing loops and workers keep."""

from __future__ import annotations

import pytest

from router_core.histogram import Histogram, HistogramSet


class TestHistogram:
    def test_bounds_are_inclusive_upper_limits(self) -> None:
        """A value equal to a bound counts in that bound's bucket, as Prometheus's le does."""
        histogram = Histogram((1.0, 2.0))
        for value in (0.5, 1.0, 1.5, 2.0, 3.0):
            histogram.observe(value)
        assert histogram.cumulative() == [(1.0, 2), (2.0, 4), (float("inf"), 5)]
        assert histogram.count == 5 and histogram.sum == 8.0

    def test_snapshot_spells_infinity(self) -> None:
        """The snapshot is plain data: cumulative pairs ending with the string +Inf."""
        histogram = Histogram((1.0,))
        histogram.observe(0.25, times=4)
        assert histogram.snapshot() == {"buckets": [[1.0, 4], ["+Inf", 4]], "sum": 1.0, "count": 4}

    def test_merge_adds_per_bucket_counts(self) -> None:
        """Counts summed elsewhere (per bucket, +Inf last) add to count and sum."""
        histogram = Histogram((1.0, 2.0))
        histogram.merge([1, 0, 2], 7.5)
        assert histogram.cumulative() == [(1.0, 1), (2.0, 1), (float("inf"), 3)]
        assert histogram.count == 3 and histogram.sum == 7.5
        with pytest.raises(ValueError, match="3 bucket counts"):
            histogram.merge([1], 1.0)

    @pytest.mark.parametrize("bounds", [(), (2.0, 1.0), (1.0, 1.0)])
    def test_bounds_must_increase(self, bounds: tuple[float, ...]) -> None:
        """Empty, decreasing or repeated bounds are refused."""
        with pytest.raises(ValueError, match="strictly increasing"):
            Histogram(bounds)

    def test_set_creates_series_on_first_observation(self) -> None:
        """A label has a series only once something was observed (or merged) under it."""
        histograms = HistogramSet((1.0,))
        histograms.merge("quiet", [0, 0], 0.0)
        histograms.observe("busy", 0.5)
        assert histograms.get("quiet") is None
        assert list(histograms.snapshot()) == ["busy"]


class TestTake:
    def test_take_returns_and_empties(self) -> None:
        """take() hands over per-bucket counts (+Inf last) and the sum, then starts again."""
        histogram = Histogram((1.0, 2.0))
        histogram.observe(0.5, times=2)
        histogram.observe(5.0)
        assert histogram.take() == ([2, 0, 1], 6.0)
        assert histogram.count == 0 and histogram.sum == 0.0
        assert histogram.take() == ([0, 0, 0], 0.0)
