"""Serving an ASGI app for a test as production does: uvicorn with httptools, on a socket
bound to a free loopback port, from a thread that the context manager stops."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from httpkit.serving import listen_socket
from tests.support.eventually import wait_until

__all__ = ["WAIT_S", "served"]

#: Seconds starting or stopping the server may take before the test fails.
WAIT_S = 10.0


@contextlib.contextmanager
def served(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` until the block ends; its base URL."""
    sock = listen_socket("127.0.0.1", 0)
    config = uvicorn.Config(
        app, http="httptools", lifespan="on", log_level="warning", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="served-app")
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), WAIT_S, "the app to start")
        assert server.started, "the app did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(WAIT_S)
        sock.close()
        assert not thread.is_alive(), "the app did not stop"
