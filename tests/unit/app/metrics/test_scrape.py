"""The admin app's ``/metrics`` scrape over real control sockets: it reads both routers at
once and never fails for one. The route itself is in ``tests/unit/app/routers/test_metrics.py``.

Each router is a real control socket answering a canned snapshot (from ``snapshots.py``)
from a thread (``snapshot_server.py``); the ``routers`` fixture is the package conftest's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.metrics import HostMetrics
from router_core.control import AsyncControlClient
from tests.unit.app.metrics.snapshot_server import SnapshotServer
from tests.unit.app.metrics.snapshots import parse, tokenizer_snapshot, value
from tests.unit.app.metrics.worker_files import write_worker_metrics


def scrape(endpoints: Mapping[str, str], multiproc_dir: Path | None = None) -> dict[str, Any]:
    """One scrape by a :class:`HostMetrics` over real clients, parsed."""

    async def run() -> bytes:
        clients = {name: AsyncControlClient(endpoint) for name, endpoint in endpoints.items()}
        try:
            host = HostMetrics(clients, multiproc_dir=multiproc_dir, timeout_s=0.3)
            return await host.exposition()
        finally:
            for client in clients.values():
                await client.close()

    return parse(asyncio.run(run()))


#: The admin app's own families, in every scrape whatever the routers answer.
ADMIN_OWN = frozenset(
    {
        "switchboard_build_info",
        "switchboard_process_cpu_seconds",
        "switchboard_process_resident_memory_bytes",
    }
)


class TestHostMetrics:
    """A scrape reads both routers at once and never fails for one."""

    def test_both_routers_and_the_directory(self, routers: tuple[str, str], tmp_path: Path) -> None:
        """Both routers up; their families and the workers' in one exposition."""
        write_worker_metrics(tmp_path)
        tokenizer, detokenizer = routers
        parsed = scrape(
            {"tokenizer_router": tokenizer, "detokenizer_router": detokenizer}, tmp_path
        )
        up = parsed["switchboard_router_up"]
        assert {s.labels["process"]: s.value for s in up.samples} == {
            "tokenizer_router": 1.0,
            "detokenizer_router": 1.0,
        }
        messages = parsed["switchboard_messages"]
        assert value(messages, "switchboard_messages_total", route="detokenize", worker="w0") == 7
        assert "switchboard_http_requests_in_flight" in parsed

    def test_worker_ids_outlive_a_silent_tokenizer_router(
        self, routers: tuple[str, str], run_dir: Path
    ) -> None:
        """Once the tokenizer router has named a worker's address, detokenizer traffic
        keeps that worker id on later scrapes while the tokenizer router is silent."""
        tokenizer, detokenizer = routers

        async def run() -> tuple[bytes, bytes]:
            clients = {
                "tokenizer_router": AsyncControlClient(tokenizer),
                "detokenizer_router": AsyncControlClient(detokenizer),
            }
            silent = AsyncControlClient(f"ipc://{run_dir}/nobody")
            try:
                host = HostMetrics(clients, multiproc_dir=None, timeout_s=0.3)
                first = await host.exposition()
                host.routers["tokenizer_router"] = silent
                return first, await host.exposition()
            finally:
                for client in (*clients.values(), silent):
                    await client.close()

        first, second = (parse(text) for text in asyncio.run(run()))
        for parsed in (first, second):
            messages = parsed["switchboard_messages"]
            assert (
                value(messages, "switchboard_messages_total", route="detokenize", worker="w0") == 7
            )
        up = {s.labels["process"]: s.value for s in second["switchboard_router_up"].samples}
        assert up == {"tokenizer_router": 0.0, "detokenizer_router": 1.0}

    def test_a_silent_router_is_down_not_an_error(self, run_dir: Path) -> None:
        """A router nobody serves is router_up 0, and its families are absent."""
        parsed = scrape({"tokenizer_router": f"ipc://{run_dir}/nobody"})
        up = parsed["switchboard_router_up"]
        assert [(s.labels, s.value) for s in up.samples] == [({"process": "tokenizer_router"}, 0.0)]
        assert set(parsed) == {"switchboard_router_up", *ADMIN_OWN}

    def test_an_unreadable_router_is_down_not_an_error(self, run_dir: Path) -> None:
        """A router answering a snapshot of another shape is router_up 0, families absent."""
        broken = tokenizer_snapshot()
        del broken["traffic"]
        endpoint = f"ipc://{run_dir}/broken"
        with SnapshotServer(endpoint, broken):
            parsed = scrape({"tokenizer_router": endpoint})
        up = parsed["switchboard_router_up"]
        assert [(s.labels, s.value) for s in up.samples] == [({"process": "tokenizer_router"}, 0.0)]
        assert set(parsed) == {"switchboard_router_up", *ADMIN_OWN}
