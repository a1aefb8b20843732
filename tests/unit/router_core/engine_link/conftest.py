"""Fixtures of the engine link's tests: the router sides a test makes, and an open link
facing one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from router_core.engine_link import EngineLink
from tests.unit.router_core.engine_link.router_side import RouterSide, Sides, inproc_endpoints


@pytest.fixture
def sides(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Sides]:
    """This test's router sides."""
    owned = Sides(context)
    yield owned
    owned.close()


@pytest.fixture
def pair(
    context: zmq.Context[zmq.Socket[bytes]], sides: Sides
) -> Iterator[tuple[EngineLink, RouterSide]]:
    """An open link on inproc endpoints and the router side facing it."""
    endpoints = inproc_endpoints()
    link = EngineLink(endpoints, context=context).open()
    yield link, sides.make(endpoints)
    link.close(0.0)
