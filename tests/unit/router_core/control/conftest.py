"""Fixtures of the control-socket tests: a server pumped by hand, a threaded server, a
blocking client of it, and raw client sockets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from router_core.control import ControlClient
from tests.unit.router_core.control.command_table import WAIT_S, Clients, InlineServer, ThreadServer


@pytest.fixture
def inline(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[InlineServer]:
    """A server the test pumps by hand."""
    server = InlineServer(context, "inproc://control")
    yield server
    server.close()


@pytest.fixture
def served(context: zmq.Context[zmq.Socket[bytes]], run_dir: Path) -> Iterator[ThreadServer]:
    """A server running in a thread on an ipc endpoint."""
    server = ThreadServer(context, f"ipc://{run_dir}/control")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(
    served: ThreadServer, context: zmq.Context[zmq.Socket[bytes]]
) -> Iterator[ControlClient]:
    """A blocking client of the threaded server."""
    with ControlClient(served.endpoint, timeout_s=WAIT_S, context=context) as sync_client:
        yield sync_client


@pytest.fixture
def clients(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Clients]:
    """This test's raw client sockets."""
    owned = Clients(context)
    yield owned
    owned.close()
