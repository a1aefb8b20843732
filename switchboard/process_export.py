"""A child's CPU time and resident memory, written to Prometheus's multiprocess files.

The workers, the built-in engines and the detokenizers write their metrics through
``prometheus_client`` in multiprocess mode, which has no process collector (it would
report whichever process the admin app is). So each such process reads its own usage
(:mod:`router_core.process_usage`) about once a second, beside its counter export, into

* ``switchboard_process_cpu_seconds_total{process, child}``, a counter: what the
  reading grew by is added, so a restarted child keeps adding to its series (a counter
  never goes backwards across a restart), and
* ``switchboard_process_resident_memory_bytes{process, child}``, a live gauge: the
  supervisor retires a dead child's value (``mark_process_dead``).

``child`` is the child's name in ``switchboard up`` (``worker-w0``, ``engine``,
``detokenizer-0``). Records nothing, and imports nothing, unless
``PROMETHEUS_MULTIPROC_DIR`` is set.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final

from router_core.process_usage import cpu_seconds, resident_bytes

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge

__all__ = ["ProcessUsageExport"]

_MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
_FAMILIES: dict[str, Any] = {}


class ProcessUsageExport:
    """Exports this process's usage as ``process`` (its role) and ``child`` (its name)."""

    def __init__(self, process: str, child: str) -> None:
        self._cpu: Counter | None = None
        self._memory: Gauge | None = None
        self._exported_cpu = 0.0
        if os.environ.get(_MULTIPROC_ENV):
            cpu, memory = _families()
            self._cpu = cpu.labels(process=process, child=child)
            self._memory = memory.labels(process=process, child=child)

    def sync(self) -> None:
        """Add the CPU seconds used since the last call; set resident memory to now's."""
        if self._cpu is None or self._memory is None:
            return
        used = cpu_seconds()
        if used > self._exported_cpu:
            self._cpu.inc(used - self._exported_cpu)
            self._exported_cpu = used
        self._memory.set(resident_bytes())


def _families() -> tuple[Counter, Gauge]:
    """The two families, made once per process (a second set would share its files)."""
    if not _FAMILIES:
        from prometheus_client import Counter, Gauge

        labels = ["process", "child"]
        # registry=None: the admin app reads the multiprocess directory, not this process.
        _FAMILIES["cpu"] = Counter(
            "switchboard_process_cpu_seconds",
            "user plus system CPU seconds a process used",
            labels,
            registry=None,
        )
        _FAMILIES["memory"] = Gauge(
            "switchboard_process_resident_memory_bytes",
            "a process's resident memory",
            labels,
            registry=None,
            multiprocess_mode="livesum",
        )
    return _FAMILIES["cpu"], _FAMILIES["memory"]
