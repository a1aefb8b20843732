"""Fixtures of the operator-command tests: the canned admin API, and no SWITCHBOARD_ADMIN_*
from the caller's environment."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from tests.unit.switchboard.admin_cli.canned_api import CannedApi, handler_for


@pytest.fixture
def api() -> Iterator[CannedApi]:
    """A canned admin API on a free loopback port, stopped after the test."""
    canned = CannedApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(canned))
    server.daemon_threads = True
    canned.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield canned
    finally:
        canned.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def no_admin_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's own SWITCHBOARD_ADMIN_* never reach these tests."""
    monkeypatch.delenv("SWITCHBOARD_ADMIN_URL", raising=False)
    monkeypatch.delenv("SWITCHBOARD_ADMIN_TOKEN", raising=False)
