"""A scrape of the whole host: both routers' snapshots, read now, and the metrics directory.

:class:`HostMetrics` asks each router it knows (``tokenizer_router`` always,
``detokenizer_router`` when its control endpoint is configured) for its ``metrics``
snapshot, all at once and each within ``timeout_s``; a router that does not answer, or
answers something it cannot read, is reported as ``switchboard_router_up{process} 0``
with its other families absent. Scraping never fails for a router: it is the
exposition of what could be read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from prometheus_client.core import Metric

from app.metrics.exposition import merge_families, multiprocess_families, render
from app.metrics.families import router_families, router_up_family, worker_ids_by_address
from router_core.control import AsyncControlClient, ControlError

__all__ = ["HostMetrics"]

log = logging.getLogger("switchboard.admin.metrics")


class HostMetrics:
    """The host's exposition from ``routers`` (process name -> control client) and the
    multiprocess directory ``multiproc_dir`` (None: no workers' or detokenizers' metrics)."""

    def __init__(
        self,
        routers: Mapping[str, AsyncControlClient],
        *,
        multiproc_dir: Path | None,
        timeout_s: float,
    ) -> None:
        self.routers = dict(routers)
        self.multiproc_dir = multiproc_dir
        self.timeout_s = timeout_s
        #: Processes whose last read failed, so a router that is down is logged once.
        self._failing: set[str] = set()

    async def _read(self, process: str, client: AsyncControlClient) -> Any:
        """The router's snapshot as plain data, or None if it did not answer."""
        try:
            reply = await client.call("metrics", reply_timeout_s=self.timeout_s)
        except ControlError as exc:
            self._failed(process, f"no metrics from the {process}: {exc}")
            return None
        return msgspec.to_builtins(reply)

    def _families(
        self, process: str, snapshot: Any, worker_ids: Mapping[str, str]
    ) -> list[Metric] | None:
        """The router's families, or None if its snapshot cannot be read."""
        if snapshot is None:
            return None
        try:
            families = router_families(snapshot, worker_ids)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._failed(process, f"unreadable metrics from the {process}: {exc!r}")
            return None
        if process in self._failing:
            self._failing.discard(process)
            log.info("the %s answers for metrics again", process)
        return families

    def _failed(self, process: str, message: str) -> None:
        if process not in self._failing:
            self._failing.add(process)
            log.warning("%s", message)

    async def families(self) -> list[Metric]:
        """Every family of the host, merged by name."""
        names = list(self.routers)
        snapshots = dict(
            zip(
                names,
                await asyncio.gather(*(self._read(name, self.routers[name]) for name in names)),
                strict=True,
            )
        )
        try:
            worker_ids = worker_ids_by_address(snapshots.get("tokenizer_router"))
        except (KeyError, TypeError, AttributeError):
            worker_ids = {}
        read = {name: self._families(name, snapshots[name], worker_ids) for name in names}
        answered = {name: got is not None for name, got in read.items()}
        sources: list[list[Metric]] = [[router_up_family(answered)]]
        sources += [got for got in read.values() if got is not None]
        if self.multiproc_dir is not None:
            sources.append(await asyncio.to_thread(multiprocess_families, self.multiproc_dir))
        return merge_families(sources)

    async def exposition(self) -> bytes:
        """The text exposition of :meth:`families`."""
        families = await self.families()
        return await asyncio.to_thread(render, families)
