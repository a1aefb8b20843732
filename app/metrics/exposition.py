"""One exposition for the whole host: families from several sources merged by name.

The routers' families (:mod:`app.metrics.families`) and the multiprocess directory's
(the workers') can share a name: ``switchboard_messages_total`` and
``switchboard_hop_latency_seconds`` have ``backward`` series from the workers. The text
format allows one block per family, so :func:`merge_families` makes one family of each
name; samples with the same name and labels from two sources are added (counters and
histogram buckets, sums and counts are additive, and a gauge is only ever reported by
one source).
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric, Sample
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

__all__ = ["merge_families", "multiprocess_families", "render"]

log = logging.getLogger("switchboard.admin.metrics")


def merge_families(sources: Iterable[Iterable[Metric]]) -> list[Metric]:
    """One family per name, in first-seen order, families without samples left out.

    ``ValueError`` when two sources give one name two types (a catalogue bug).
    """
    merged: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for families in sources:
        for family in families:
            first = merged.get(family.name)
            if first is None:
                merged[family.name] = first = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
                values[family.name] = {}
            elif first.type != family.type:
                raise ValueError(f"{family.name} is a {first.type} and a {family.type}")
            series = values[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                series[key] = series.get(key, 0.0) + sample.value
    families = []
    for name, family in merged.items():
        family.samples = [
            Sample(sample, dict(labels), value) for (sample, labels), value in values[name].items()
        ]
        if family.samples:
            families.append(family)
    return families


def multiprocess_families(path: Path) -> list[Metric]:
    """The aggregate of the multiprocess directory ``path``; none if it cannot be read.

    A file can be cut short by a process killed while it grew one: that scrape then
    lacks the directory's families (logged) rather than failing. The read holds off the
    supervisor's folding of a dead child's files into the archives (a shared lock on the
    directory), so no scrape counts a file twice or misses it.
    """
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(path))  # type: ignore[no-untyped-call]  # 0.26
    try:
        with _folds_held_off(path):
            return list(registry.collect())
    except (OSError, ValueError, KeyError, RuntimeError, struct.error) as exc:
        log.warning("cannot read the metrics directory %s: %s", path, exc)
        return []


@contextmanager
def _folds_held_off(path: Path) -> Iterator[None]:
    """A shared ``flock`` on the directory while it is read; the supervisor folds under
    the exclusive one (:mod:`switchboard.supervisor.metrics_dir`)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH)
        yield
    finally:
        os.close(descriptor)


class _Families(Collector):
    """A collector handing out families already built."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def render(families: list[Metric]) -> bytes:
    """The Prometheus text format (0.0.4) of ``families``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)
