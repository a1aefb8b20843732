"""What ZeroMQ alone costs a router per worker: the floor under ``router_kib_per_worker``.

Every worker gives the router three ZeroMQ connections (the protocol's topology,
``docs/protocol.md`` section 1.3): the worker's PUSH to the router's ``workers`` PULL,
its PUSH to the ``requests`` PULL, and the router's own PUSH to the worker's return
address. :func:`measure_floor` builds exactly that topology in bare pyzmq processes,
with no Switchboard code: *peers* processes (a thousand workers' sides each) bind
``count`` PULLs and connect ``2 * count`` PUSHes; a *router* process binds the two
PULLs, reads one message from each peer (a registration's worth), connects a PUSH to
each peer and sends one message on it (a reply's worth), with the router's high-water
marks. The router process's RSS growth over ``count`` is the floor; what the real router
uses beyond it is Switchboard's own share.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Final

import psutil
import zmq

from router_core.limits import DEFAULT_HWM
from switchboard.bench.procs import ProcessGroup, Report, trial_dir
from switchboard.bench.workers_sim import raise_open_file_limit

__all__ = ["measure_floor"]

#: A message of about a registration's size.
_MESSAGE: Final = b"x" * 200
#: How long the processes wait for each other's messages in all.
_WAIT_S: Final = 60.0
#: Workers' sides per peers process: each takes three sockets and a dozen descriptors.
_PEERS_PER_PROCESS: Final = 1000
#: Sockets per context: beyond libzmq's default of 1023.
_MAX_SOCKETS: Final = 65536


def _context() -> zmq.Context[zmq.Socket[bytes]]:
    raise_open_file_limit()
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    context.set(zmq.MAX_SOCKETS, _MAX_SOCKETS)
    return context


def _peers(report: Report, base: str, indices: range) -> None:
    """Some of the workers' side: a bound PULL for each of ``indices``, and two PUSHes
    each to the router's PULLs."""
    context = _context()
    pulls, pushes = [], []
    for index in indices:
        pull = context.socket(zmq.PULL)
        pull.bind(f"ipc://{base}/peer-{index}")
        pulls.append(pull)
        for name in ("workers", "requests"):
            push = context.socket(zmq.PUSH)
            push.connect(f"ipc://{base}/{name}")
            pushes.append(push)
            if name == "workers":
                push.send(_MESSAGE)  # queued until the router binds (no ZMQ_IMMEDIATE)
    report.send(("ready", None))
    deadline = time.monotonic() + _WAIT_S
    for pull in pulls:
        if not pull.poll(max(1, int((deadline - time.monotonic()) * 1000))):
            break
        pull.recv()
    report.send(("done", None))
    time.sleep(_WAIT_S)  # hold the connections until the parent stops us


def _router(report: Report, base: str, count: int) -> None:
    """The router's side; reports its RSS growth per worker in KiB."""
    me = psutil.Process()
    context = _context()
    before = me.memory_info().rss
    inbound = {}
    for name in ("workers", "requests"):
        sock = context.socket(zmq.PULL)
        sock.setsockopt(zmq.RCVHWM, DEFAULT_HWM)
        sock.bind(f"ipc://{base}/{name}")
        inbound[name] = sock
    deadline = time.monotonic() + _WAIT_S
    for _ in range(count):
        if not inbound["workers"].poll(max(1, int((deadline - time.monotonic()) * 1000))):
            raise TimeoutError("the peers' messages did not all arrive")
        inbound["workers"].recv()
    outbound = []
    for index in range(count):
        push = context.socket(zmq.PUSH)
        push.setsockopt(zmq.SNDHWM, DEFAULT_HWM)
        push.setsockopt(zmq.LINGER, 0)
        push.setsockopt(zmq.IMMEDIATE, 1)
        push.connect(f"ipc://{base}/peer-{index}")
        outbound.append(push)
    for push in outbound:
        if not push.poll(int(_WAIT_S * 1000), zmq.POLLOUT):
            raise TimeoutError("a peer never accepted the router's connection")
        push.send(_MESSAGE)
    time.sleep(1.0)  # let the IO thread settle what it allocated for the sends
    report.send(("floor", (me.memory_info().rss - before) / 1024 / count))
    time.sleep(_WAIT_S)


def measure_floor(count: int, root: str | Path | None = None) -> float:
    """KiB of RSS a bare pyzmq router grows by per worker, for ``count`` workers."""
    with trial_dir(root, prefix="sb-floor-") as base, ProcessGroup() as group:
        slices = [
            range(start, min(start + _PEERS_PER_PROCESS, count))
            for start in range(0, count, _PEERS_PER_PROCESS)
        ]
        peers = [group.start("floor-peers", _peers, str(base), part) for part in slices]
        for reader in peers:
            group.expect(reader, "ready", _WAIT_S)
        router = group.start("floor-router", _router, str(base), count)
        floor: float = group.expect(router, "floor", _WAIT_S + 10.0)
        return floor
