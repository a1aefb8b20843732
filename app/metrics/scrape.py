"""A scrape of the whole host: both routers' snapshots, read now, and the metrics directory.

:class:`HostMetrics` asks each router it knows (``tokenizer_router`` always,
``detokenizer_router`` when its control endpoint is configured) for its ``metrics``
snapshot (:data:`SNAPSHOTS`: the command, and so the reply struct, of each), all at once
and each within ``timeout_s``; a router that does not answer, or answers something it
cannot read, is reported as ``switchboard_router_up{process} 0`` with its other
families absent. Scraping never fails for a router: it is the exposition of what could
be read.
"""

from __future__ import annotations

import asyncio
import logging
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from prometheus_client.core import Metric

from app.metrics.exposition import merge_families, multiprocess_families, render
from app.metrics.families import (
    build_info_family,
    router_families,
    router_up_family,
    usage_families,
    worker_ids_by_address,
)
from app.task_groups import every
from router_core.control import AsyncControlClient, ControlCommand, ControlError
from router_core.control.commands import DETOK_METRICS, METRICS
from router_core.control.replies import RouterMetrics, TokenizerRouterMetrics
from router_core.process_usage import cpu_seconds, resident_bytes
from router_core.version import package_version

__all__ = ["MAX_ADDRESSES", "SNAPSHOTS", "HostMetrics"]

#: The ``metrics`` command of each router process, which gives its snapshot's struct.
SNAPSHOTS: Final[dict[str, ControlCommand[Any, Any]]] = {
    "tokenizer_router": METRICS,
    "detokenizer_router": DETOK_METRICS,
}

#: Worker return addresses remembered across scrapes (a bound, not an expected size).
MAX_ADDRESSES = 4096

log = logging.getLogger("switchboard.admin.metrics")


class HostMetrics:
    """The host's exposition from ``routers`` (process name -> control client) and the
    multiprocess directory ``multiproc_dir`` (None: none of the children's metrics)."""

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
        #: Return address -> worker id, kept across scrapes so that detokenizer traffic
        #: keeps its worker id while the tokenizer router does not answer or after a
        #: worker left its registry; the most recently seen :data:`MAX_ADDRESSES`.
        self._worker_ids: dict[str, str] = {}

    async def _read(self, process: str, client: AsyncControlClient) -> RouterMetrics | None:
        """The router's snapshot, or None if it did not answer (or answered another shape)."""
        try:
            snapshot: RouterMetrics = await client.request(
                SNAPSHOTS[process], reply_timeout_s=self.timeout_s
            )
        except ControlError as exc:
            self._failed(process, f"no metrics from the {process}: {exc}")
            return None
        return snapshot

    def _families(
        self, process: str, snapshot: RouterMetrics | None, worker_ids: Mapping[str, str]
    ) -> list[Metric] | None:
        """The router's families, or None if its snapshot cannot be read."""
        if snapshot is None:
            return None
        try:
            families = router_families(snapshot, worker_ids)
        except ValueError as exc:
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
                await every(self._read(name, self.routers[name]) for name in names),
                strict=True,
            )
        )
        tokenizer = snapshots.get("tokenizer_router")
        if isinstance(tokenizer, TokenizerRouterMetrics):
            self._remember(worker_ids_by_address(tokenizer))
        worker_ids = self._worker_ids
        read = {name: self._families(name, snapshots[name], worker_ids) for name in names}
        answered = {name: got is not None for name, got in read.items()}
        sources: list[list[Metric]] = [[router_up_family(answered), *self._own()]]
        sources += [got for got in read.values() if got is not None]
        if self.multiproc_dir is not None:
            sources.append(await asyncio.to_thread(multiprocess_families, self.multiproc_dir))
        return merge_families(sources)

    @staticmethod
    def _own() -> list[Metric]:
        """The admin app's own families: what is deployed, and its CPU and memory."""
        return [
            build_info_family(package_version(), platform.python_version()),
            *usage_families("admin", "admin", cpu_seconds(), resident_bytes()),
        ]

    def _remember(self, seen: Mapping[str, str]) -> None:
        """Add this scrape's addresses (newest last) and forget the oldest beyond the cap."""
        for address, worker in seen.items():
            self._worker_ids.pop(address, None)
            self._worker_ids[address] = worker
        for address in list(self._worker_ids)[: max(0, len(self._worker_ids) - MAX_ADDRESSES)]:
            del self._worker_ids[address]

    async def exposition(self) -> bytes:
        """The text exposition of :meth:`families`."""
        families = await self.families()
        return await asyncio.to_thread(render, families)
