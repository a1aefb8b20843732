"""The task that samples the workers' metrics for :mod:`app.worker_stats`.

:class:`WorkerStatsSampler` reads the multiprocess directory (the same aggregate
``/metrics`` serves, :func:`app.metrics.exposition.multiprocess_families`, in a thread)
every ``interval_s`` into a :class:`~app.worker_stats.StatsWindow`, so that the window is
full whenever someone looks. Without a directory it reads nothing and its page says
``available: false``. A directory with no file yet is a sample of zeros (the workers
have counted nothing); a read that fails (logged by the reader) adds no sample, so no
window ever starts from totals that were not read. The loop goes on until cancelled.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Final

from app.metrics.exposition import multiprocess_families
from app.worker_stats import StatsWindow, WorkerStatsPage, worker_totals

__all__ = ["DEFAULT_INTERVAL_S", "DEFAULT_WINDOW_S", "WorkerStatsSampler"]

#: Seconds between samples: the console's figures are at most this old.
DEFAULT_INTERVAL_S: Final = 5.0
#: The window the figures cover: the same minute as the console's throughput charts.
DEFAULT_WINDOW_S: Final = 60.0


def _has_files(directory: Path) -> bool:
    return any(directory.glob("*.db"))


class WorkerStatsSampler:
    """Samples ``metrics_dir`` every ``interval_s`` into a ``window_s`` window."""

    def __init__(
        self,
        metrics_dir: Path | None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        self.metrics_dir = metrics_dir
        self.interval_s = interval_s
        self.window = StatsWindow(window_s)

    async def sample_once(self) -> None:
        """Read the directory once and add the sample."""
        if self.metrics_dir is None:
            return
        directory = self.metrics_dir
        families = await asyncio.to_thread(multiprocess_families, directory)
        if not families and await asyncio.to_thread(_has_files, directory):
            return  # the read failed: the reader logged why
        self.window.observe(time.monotonic(), worker_totals(families))

    async def run(self) -> None:
        """Sample until cancelled (nothing to do without a directory)."""
        if self.metrics_dir is None:
            return
        while True:
            await self.sample_once()
            await asyncio.sleep(self.interval_s)

    def page(self) -> WorkerStatsPage:
        """The latest figures (``available`` false without a directory)."""
        page = self.window.page()
        if self.metrics_dir is None:
            return page.model_copy(update={"available": False})
        return page
