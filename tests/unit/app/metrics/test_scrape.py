"""The admin app's ``/metrics`` over real control sockets: a scrape reads both routers at
once and never fails for one, and the route's content type and who may read it.

Each router is a real control socket answering a canned snapshot (from
``test_families.py``) from a thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq
from fastapi.testclient import TestClient

from app.main import create_app
from app.metrics import HostMetrics
from app.settings import AdminSettings
from router_core.control import AsyncControlClient, Command, ControlServer
from router_core.counters import Counters
from router_core.transport import bind, close_bound
from tests.unit.app.metrics.test_families import (
    detokenizer_snapshot,
    parse,
    tokenizer_snapshot,
    value,
    write_worker_metrics,
)

WAIT_S = 5.0


class SnapshotServer:
    """A real control socket answering ``metrics`` with a canned snapshot, from a thread."""

    def __init__(self, endpoint: str, snapshot: Mapping[str, Any]) -> None:
        self.endpoint = endpoint
        self.snapshot = snapshot
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshot-server")

    def _run(self) -> None:
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        sock = bind(context, zmq.ROUTER, self.endpoint)
        try:
            commands = {"metrics": Command(lambda state, args, reply_to: state, _NoArgs, "m")}
            server = ControlServer(sock, dict(self.snapshot), commands, Counters())
            self._ready.set()
            while not self._stop.is_set():
                if sock.poll(20, zmq.POLLIN):
                    server.handle_ready()
        finally:
            close_bound(sock, self.endpoint)
            context.destroy(linger=0)

    def __enter__(self) -> SnapshotServer:
        self._thread.start()
        assert self._ready.wait(WAIT_S), "the snapshot server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive()


class _NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


@pytest.fixture
def routers(run_dir: Path) -> Iterator[tuple[str, str]]:
    """The two routers' control endpoints, each answering a canned snapshot."""
    tokenizer = f"ipc://{run_dir}/router-control"
    detokenizer = f"ipc://{run_dir}/detok-router-control"
    with (
        SnapshotServer(tokenizer, tokenizer_snapshot()),
        SnapshotServer(detokenizer, detokenizer_snapshot()),
    ):
        yield tokenizer, detokenizer


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
        assert set(parsed) == {"switchboard_router_up"}

    def test_an_unreadable_router_is_down_not_an_error(self, run_dir: Path) -> None:
        """A router answering a snapshot of another shape is router_up 0, families absent."""
        broken = tokenizer_snapshot()
        del broken["traffic"]
        endpoint = f"ipc://{run_dir}/broken"
        with SnapshotServer(endpoint, broken):
            parsed = scrape({"tokenizer_router": endpoint})
        up = parsed["switchboard_router_up"]
        assert [(s.labels, s.value) for s in up.samples] == [({"process": "tokenizer_router"}, 0.0)]
        assert set(parsed) == {"switchboard_router_up"}


class TestMetricsRoute:
    """``GET /metrics`` on the admin app: content type and who may read it."""

    def settings(self, endpoints: tuple[str, str], **tokens: str) -> AdminSettings:
        tokenizer, detokenizer = endpoints
        return AdminSettings(
            control_endpoint=tokenizer,
            detok_control_endpoint=detokenizer,
            metrics_timeout_s=1.0,
            **tokens,  # type: ignore[arg-type]
        )

    def test_open_without_viewer_tokens_on_loopback(self, routers: tuple[str, str]) -> None:
        """Only operator tokens on loopback: Prometheus reads it without a token."""
        app = create_app(self.settings(routers, operator_tokens="ops:opstoken"))
        with TestClient(app) as client:
            answer = client.get("/metrics")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "switchboard_router_up" in parse(answer.content)

    def test_viewer_tokens_make_it_need_one(self, routers: tuple[str, str]) -> None:
        """With viewer tokens configured, no token is a 401 and a viewer's token reads it."""
        settings = self.settings(
            routers, operator_tokens="ops:opstoken", viewer_tokens="grafana:viewtoken"
        )
        with TestClient(create_app(settings)) as client:
            assert client.get("/metrics").status_code == 401
            bearer = {"Authorization": "Bearer viewtoken"}
            assert client.get("/metrics", headers=bearer).status_code == 200
