"""Tests for the worker's metric buffers: a flush writes exactly what observing one by one
would have written (so a prometheus_client that keeps its values differently fails here)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.samples import Sample

from router_core.histogram import ITL_BUCKETS
from switchboard.worker.metric_buffers import CounterBuffer, HistogramBuffer, add_to_histogram

VALUES = (0.0004, 0.001, 0.0011, 0.003, 0.003, 0.2, 7.0)


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, str], float]:
    """``{(sample name, le): value}`` of one family, creation timestamps left out."""
    found: dict[tuple[str, str], float] = {}
    for family in registry.collect():
        if family.name != name:
            continue
        sample: Sample
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                found[(sample.name, sample.labels.get("le", ""))] = sample.value
    return found


def histogram() -> tuple[CollectorRegistry, Histogram]:
    """An inter-token-latency-shaped histogram in a registry of its own."""
    registry = CollectorRegistry()
    made = Histogram("itl_seconds", "x", ["worker"], buckets=ITL_BUCKETS, registry=registry)
    return registry, made


class TestHistogramBuffer:
    def test_flush_equals_observing_one_by_one(self) -> None:
        """Bucket counts (bounds inclusive), count and sum match direct observations."""
        direct_registry, direct = histogram()
        buffered_registry, target = histogram()
        buffer = HistogramBuffer(target.labels(worker="w0"), ITL_BUCKETS)
        for value in VALUES:
            direct.labels(worker="w0").observe(value)
            buffer.observe(value)
        direct.labels(worker="w0").observe(0.05)
        direct.labels(worker="w0").observe(0.05)
        buffer.observe(0.05, times=2)
        assert samples(buffered_registry, "itl_seconds") != samples(direct_registry, "itl_seconds")
        buffer.flush()
        assert samples(buffered_registry, "itl_seconds") == samples(direct_registry, "itl_seconds")

    def test_a_second_flush_adds_nothing(self) -> None:
        """A flush empties the buffer: flushing again changes nothing."""
        registry, target = histogram()
        buffer = HistogramBuffer(target.labels(worker="w0"), ITL_BUCKETS)
        buffer.observe(0.002)
        buffer.flush()
        once = samples(registry, "itl_seconds")
        buffer.flush()
        assert samples(registry, "itl_seconds") == once
        assert once[("itl_seconds_count", "")] == 1

    def test_wrong_bucket_count_is_refused(self) -> None:
        """Counts that do not match the histogram's buckets raise TypeError."""
        _, target = histogram()
        with pytest.raises(TypeError, match="histogram values"):
            add_to_histogram(target.labels(worker="w0"), [1, 2], 1.0)


class TestCounterBuffer:
    def test_increments_arrive_on_flush(self) -> None:
        """Pending increments are written once, on flush."""
        registry = CollectorRegistry()
        counter = Counter("tokens", "x", ["worker"], registry=registry)
        buffer = CounterBuffer(counter.labels(worker="w0"))
        buffer.inc()
        buffer.inc(4)
        assert samples(registry, "tokens")[("tokens_total", "")] == 0
        buffer.flush()
        buffer.flush()
        assert samples(registry, "tokens")[("tokens_total", "")] == 5
