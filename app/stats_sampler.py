"""The task that samples the workers' metrics for :mod:`app.worker_stats`.

:class:`WorkerStatsSampler` reads the multiprocess directory (the same aggregate
``/metrics`` serves, :func:`app.metrics.exposition.multiprocess_families`, in a thread)
every ``interval_s`` into a :class:`~app.worker_stats.StatsWindow`, so that the window is
full whenever someone looks. Without a directory it reads nothing and its page says
``available: false``. A directory with no file yet is a sample of zeros (the workers
have counted nothing); a read that fails (logged by the reader) adds no sample, so no
window ever starts from totals that were not read. The loop goes on until cancelled.

Each read also goes into a :class:`~app.stack_history.StackHistory`: the whole stack's
throughput and latency per interval, ``history_s`` of them (15 minutes by default), for
``GET /api/history``.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Final

from app.metrics.exposition import multiprocess_families
from app.stack_history import DEFAULT_HISTORY_S, HistoryPage, StackHistory, generation_tokens
from app.worker_stats import StatsWindow, WorkerStatsPage, worker_totals

__all__ = ["DEFAULT_INTERVAL_S", "DEFAULT_WINDOW_S", "WorkerStatsSampler"]

#: Seconds between samples: the console's figures are at most this old.
DEFAULT_INTERVAL_S: Final = 5.0
#: The window the figures cover: the same minute as the console's throughput charts.
DEFAULT_WINDOW_S: Final = 60.0


def _has_files(directory: Path) -> bool:
    return any(directory.glob("*.db"))


class WorkerStatsSampler:
    """Samples ``metrics_dir`` every ``interval_s`` into a ``window_s`` window, and into a
    history of the stack's samples reaching ``history_s`` back."""

    def __init__(
        self,
        metrics_dir: Path | None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        window_s: float = DEFAULT_WINDOW_S,
        history_s: float = DEFAULT_HISTORY_S,
    ) -> None:
        self.metrics_dir = metrics_dir
        self.interval_s = interval_s
        self.window = StatsWindow(window_s)
        self.history = StackHistory(max(1, math.ceil(history_s / interval_s)))

    async def sample_once(self) -> None:
        """Read the directory once and add the sample."""
        if self.metrics_dir is None:
            return
        directory = self.metrics_dir
        families = await asyncio.to_thread(multiprocess_families, directory)
        if not families and await asyncio.to_thread(_has_files, directory):
            return  # the read failed: the reader logged why
        now, totals = time.monotonic(), worker_totals(families)
        self.window.observe(now, totals)
        self.history.observe(now, time.time(), totals, generation_tokens(families))

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

    def history_page(self, after: float | None = None) -> HistoryPage:
        """The stack's samples, oldest first (with ``after``, those stamped later);
        ``available`` false without a directory."""
        return HistoryPage(
            available=self.metrics_dir is not None,
            interval_s=self.interval_s,
            capacity=self.history.capacity,
            samples=self.history.samples(after),
        )
