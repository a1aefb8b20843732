"""The stack's Prometheus multiprocess directory, ``<run dir>/metrics``.

Workers, the engine and the detokenizers write their ``prometheus_client`` values there,
one file per process and kind (``PROMETHEUS_MULTIPROC_DIR``); the admin app aggregates it at scrape
time. The supervisor owns its life: :meth:`MetricsDirectory.prepare` wipes and makes it
before any child starts (files of an earlier run would add in), :meth:`retire` drops a
child's live gauges as soon as it exits (before it is restarted), so a killed worker's
in-flight value leaves no stale series, and :meth:`remove` deletes it when the stack
stops. A dead process's counters and histograms stay: a counter never goes backwards,
and the restarted process counts only what it counts itself.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

__all__ = ["MULTIPROC_ENV", "MetricsDirectory"]

log = logging.getLogger("switchboard.supervisor")

#: The variable prometheus_client reads at import for its multiprocess directory.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class MetricsDirectory:
    """``path``, wiped at :meth:`prepare`, removed at :meth:`remove`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def prepare(self) -> Path:
        """An empty directory at :attr:`path` (mode 0700); ``OSError`` if it cannot be made."""
        if self.path.is_dir() and not self.path.is_symlink():
            shutil.rmtree(self.path)
        else:
            self.path.unlink(missing_ok=True)
        self.path.mkdir(mode=0o700, parents=True)
        return self.path

    def retire(self, pid: int) -> None:
        """Drop process ``pid``'s live gauges (``mark_process_dead``); never raises."""
        from prometheus_client.multiprocess import mark_process_dead

        try:
            mark_process_dead(pid, str(self.path))  # type: ignore[no-untyped-call]  # 0.26
        except OSError as exc:
            log.warning("cannot retire the metrics of pid %d: %s", pid, exc)

    def remove(self) -> None:
        """Delete the directory and every file in it (nothing if it is not there)."""
        if self.path.is_dir() and not self.path.is_symlink():
            shutil.rmtree(self.path, ignore_errors=True)
