"""Bounded zmq contexts (``tests.support.zmq_context``): a leaked socket fails at once."""

from __future__ import annotations

import threading
import time

import pytest
import zmq
import zmq.asyncio

from tests.support.eventually import wait_until
from tests.support.zmq_context import ContextLeak, bounded_context, open_sockets


class TestBoundedContext:
    """A context whose teardown names leaks instead of hanging on them."""

    def test_sockets_default_to_linger_zero(self) -> None:
        """Sockets made on the context have LINGER 0 unless they set their own."""
        with bounded_context() as context, context.socket(zmq.PUSH) as push:
            assert push.getsockopt(zmq.LINGER) == 0

    def test_closed_sockets_terminate_quietly(self) -> None:
        """With every socket closed the context terminates and nothing is raised."""
        with bounded_context() as context:
            context.socket(zmq.PULL).close()
        assert context.closed

    def test_leaked_socket_fails_at_once_naming_it(self) -> None:
        """A socket left open fails the teardown at once (well inside the bound), naming
        its type and endpoint, and the context still ends terminated."""
        started = time.monotonic()
        with pytest.raises(ContextLeak) as failure, bounded_context() as context:
            leaked = context.socket(zmq.PULL)  # held, as a forgotten fixture would hold it
            leaked.bind("inproc://leaked")
        assert time.monotonic() - started < 1.0
        assert "1 socket(s) left open" in str(failure.value)
        assert "PULL socket (inproc://leaked)" in str(failure.value)
        assert context.closed and open_sockets(context) == []

    def test_sweep_closes_leftovers_silently(self) -> None:
        """With sweep a socket left open is closed without a failure."""
        with bounded_context(sweep=True) as context:
            leftover = context.socket(zmq.PUSH)
        assert context.closed and leftover.closed

    def test_untracked_socket_fails_after_the_bound(self) -> None:
        """A socket the context does not track (made on a shadow) fails the teardown
        after the bound instead of hanging; term() ends once that socket closes."""
        started = time.monotonic()
        leak = pytest.raises(ContextLeak, match=r"not terminated after 0\.2s")
        with leak, bounded_context(bound_s=0.2) as context:
            stray = zmq.Context.shadow(context.underlying).socket(zmq.PUSH)
        assert time.monotonic() - started < 2.0
        terminators = [t for t in threading.enumerate() if t.name == "zmq-context-term"]
        assert terminators and all(t.daemon for t in terminators)
        stray.close(linger=0)
        wait_until(lambda: context.closed, 5.0, "term() to finish once the stray socket closed")

    def test_error_in_the_block_is_kept(self) -> None:
        """When the block raises, its error propagates (leftovers swept), not a leak."""
        with pytest.raises(KeyError), bounded_context() as context:
            leftover = context.socket(zmq.DEALER)
            raise KeyError("the test's own failure")
        assert context.closed and leftover.closed

    def test_asyncio_context(self) -> None:
        """An asyncio context is bounded the same way."""
        leak = pytest.raises(ContextLeak, match="ROUTER socket")
        with leak, bounded_context(zmq.asyncio.Context) as context:
            assert isinstance(context, zmq.asyncio.Context)
            leaked = context.socket(zmq.ROUTER)
        assert leaked.closed
