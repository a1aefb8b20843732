"""zmq contexts for tests whose teardown is bounded: a leaked socket fails at once.

A context is terminated by ``term()``, which blocks for as long as any socket on it is
open. A socket a test forgot would then stall the run until pytest's 120 s timeout, with
nothing naming the culprit. :func:`bounded_context` makes a context whose sockets default
to ``LINGER 0`` (a closed socket never waits for its peer) and, at exit, names every
socket still open on it and raises :class:`ContextLeak`, having closed them, before it
terminates. ``term()`` itself runs in a daemon thread joined for ``bound_s``, so a socket
the context does not track (one made on a shadow of it) fails the test after that bound
instead of hanging it.

With ``sweep=True`` open sockets are closed silently instead (fixtures whose contract is
"sockets left on the context are closed for you"); the bound on ``term()`` still holds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import zmq

__all__ = ["TERM_BOUND_S", "ContextLeak", "bounded_context", "open_sockets", "terminate"]

#: Seconds ``term()`` may take once every socket is closed (it is instant then).
TERM_BOUND_S = 5.0

ContextT = TypeVar("ContextT", bound="zmq.Context[Any]")


class ContextLeak(AssertionError):
    """A test left sockets open on its zmq context (an assertion failure of the test)."""


def _describe(sock: zmq.Socket[Any]) -> str:
    try:
        kind = zmq.SocketType(int(sock.getsockopt(zmq.TYPE))).name
        endpoint = sock.getsockopt(zmq.LAST_ENDPOINT)
    except zmq.ZMQError as error:  # the context is already terminating
        return f"socket ({error})"
    where = endpoint.decode() if isinstance(endpoint, bytes) and endpoint else "no endpoint"
    return f"{kind} socket ({where})"


def open_sockets(context: zmq.Context[Any]) -> list[zmq.Socket[Any]]:
    """The sockets made on ``context`` (this object, not its shadows) and not closed."""
    tracked: Any = getattr(context, "_sockets", ())
    return [sock for sock in list(tracked) if not sock.closed]


def terminate(
    context: zmq.Context[Any], *, sweep: bool = False, bound_s: float = TERM_BOUND_S
) -> None:
    """Close what is left on ``context`` and terminate it within ``bound_s`` seconds.

    Raises :class:`ContextLeak` naming the sockets a test left open (unless ``sweep``),
    and when ``term()`` is still blocked after ``bound_s``: its thread is a daemon, so
    the process can still exit, and it ends on its own once the stray socket closes.
    """
    leaked = open_sockets(context)
    names = [_describe(sock) for sock in leaked]
    for sock in leaked:
        sock.close(linger=0)
    terminator = threading.Thread(target=context.term, name="zmq-context-term", daemon=True)
    terminator.start()
    terminator.join(bound_s)
    if terminator.is_alive():
        raise ContextLeak(
            f"zmq context not terminated after {bound_s:.1f}s: a socket this context does "
            "not track (made on a shadow of it, or by C code) is still open, or a closed "
            "socket lingers longer than that with messages unsent"
        )
    if names and not sweep:
        raise ContextLeak(f"{len(names)} socket(s) left open on the test's zmq context: {names}")


@contextmanager
def bounded_context(
    factory: type[ContextT] = zmq.Context,  # type: ignore[assignment]
    *,
    sweep: bool = False,
    bound_s: float = TERM_BOUND_S,
) -> Iterator[ContextT]:
    """A new context of ``factory``, its sockets ``LINGER 0`` by default, terminated
    with :func:`terminate` at exit (sweeping, when the block raised: its error is kept)."""
    context = factory()
    context.setsockopt(zmq.LINGER, 0)
    try:
        yield context
    except BaseException:
        # The block's own failure is the news; sockets it left are its consequence.
        with suppress(ContextLeak):
            terminate(context, sweep=True, bound_s=bound_s)
        raise
    terminate(context, sweep=sweep, bound_s=bound_s)
