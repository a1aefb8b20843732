"""``GET /api/events`` over real sockets: the admin app served by uvicorn on a free loopback
port, reading a canned router's control socket, refusing streams beyond the hub's limit."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn
from fastapi import FastAPI

from app.events import EventHub
from app.main import create_app
from app.server import listen_socket
from app.settings import AdminSettings
from router_core.control import Command
from router_core.control.commands import LIST_WORKERS, LOAD, STATUS
from router_core.control.replies import RouterStatus
from tests.support.eventually import wait_until
from tests.unit.app.metrics.snapshot_server import CannedControlServer
from tests.unit.app.router_replies import view

#: Seconds anything here may take before the test fails instead of hanging.
WAIT_S = 10.0
TOKEN = "opstoken"
#: A router ``status`` reply: not paused, the engine live.
STATUS_REPLY: dict[str, Any] = {
    "role": "tokenizer_router",
    "pid": 7,
    "uptime_s": 5.0,
    "last_op_id": "",
    "last_op_seq": 0,
    "pending_operations": 0,
    "counters": {},
    "backlogs": {},
    "paused": False,
    "pause_mode": None,
    "pause_state_since": 100.0,
    "recent_operations": [],
    "version": "1",
    "workers": {"serving": 1},
    "engine_live": True,
}


def canned_router(endpoint: str) -> CannedControlServer:
    """A real control socket answering ``list_workers`` (one worker), ``status`` and
    ``load`` (no report yet), from a thread: what the admin app's poller reads."""
    status = msgspec.convert(STATUS_REPLY, RouterStatus)
    commands: dict[str, Command[None]] = {
        "list_workers": Command.serving(LIST_WORKERS, lambda *_: [view("w0")]),
        "status": Command.serving(STATUS, lambda *_: status),
        "load": Command.serving(LOAD, lambda *_: None),
    }
    return CannedControlServer(endpoint, commands)


@contextlib.contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn from a thread on a free loopback port; its base URL."""
    sock = listen_socket("127.0.0.1", 0)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="admin-app")
    thread.start()
    try:
        wait_until(lambda: server.started, WAIT_S, "the admin app to start")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(WAIT_S)
        sock.close()
        assert not thread.is_alive(), "the admin app did not stop"


def open_stream(
    client: httpx.Client, streams: contextlib.ExitStack
) -> tuple[httpx.Response, Iterator[str]]:
    """Open ``/api/events`` (closed with ``streams``) and read up to its snapshot; the
    response and its line iterator, to keep while the stream should stay open (a
    discarded iterator closes the connection)."""
    response = streams.enter_context(client.stream("GET", "/api/events"))
    assert response.status_code == 200, response.read()
    lines = response.iter_lines()
    for line in lines:
        if line == "event: snapshot":
            return response, lines
    pytest.fail("the stream ended before its snapshot")


@pytest.fixture
def app(run_dir: Path) -> Iterator[FastAPI]:
    """The admin app reading a canned router, one operator token."""
    endpoint = f"ipc://{run_dir}/router-control"
    settings = AdminSettings(
        control_endpoint=endpoint,
        operator_tokens=f"ops:{TOKEN}",  # type: ignore[arg-type]
        poll_interval_s=0.05,
        control_timeout_s=WAIT_S,
        # A stream notices its client left at the next write at the latest.
        keepalive_s=0.2,
    )
    with canned_router(endpoint):
        yield create_app(settings)


class TestStreamLimit:
    """Beyond the hub's max_subscribers, /api/events answers 503 in the error shape."""

    def test_streams_beyond_the_limit_get_503_until_one_ends(self, app: FastAPI) -> None:
        """With the limit at two and two streams open, a third is refused with 503, the
        app's error body and Retry-After, and counted; once a stream ends, one opens."""
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with (
            served(app) as url,
            httpx.Client(base_url=url, headers=headers, timeout=WAIT_S) as client,
            contextlib.ExitStack() as streams,
        ):
            hub: EventHub = app.state.admin.hub
            # AdminSettings has no max_subscribers yet; the limit is the hub's.
            hub.max_subscribers = 2
            first, second = open_stream(client, streams), open_stream(client, streams)
            assert hub.subscribers == 2
            refused = client.get("/api/events")
            assert refused.status_code == 503
            body = refused.json()
            assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
            assert "too many event streams: 2 are open" in body["error"]["message"]
            assert int(refused.headers["Retry-After"]) >= 1
            assert (hub.subscribers, hub.refused_subscribers) == (2, 1)
            first[0].close()
            wait_until(lambda: hub.subscribers == 1, WAIT_S, "the closed stream to leave")
            third = open_stream(client, streams)
            assert (hub.subscribers, hub.refused_subscribers) == (2, 1)
            assert not second[0].is_closed and not third[0].is_closed
