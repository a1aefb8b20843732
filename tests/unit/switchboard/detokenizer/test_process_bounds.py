"""The detokenizer's sockets to workers are bounded: a worker's socket closes once it was
sent nothing for ``destination_idle_s`` and it has no open request here, what it still
queued is counted, and at most ``max_destinations`` exist. The detokenizer runs in a
thread on the test's context; the workers are the test's PULL sockets."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from router_core.wire.codec import frame_batch
from router_core.wire.outputs import BatchTokenIDOutput
from switchboard.detokenizer import Detokenizer, DetokenizerSettings
from switchboard.text import Tokenizer
from tests.support.eventually import wait_until

IDLE_S = 0.2
SWEEP_S = 0.05
STATE_TTL_S = 1.0
#: Longest a close may take once it is due (a sweep, and the test's own polling).
CLOSE_BOUND_S = IDLE_S + SWEEP_S + 2.0
FINISHED = {"type": "length", "length": 1}


def token_batch(owner: str, rid: str, finished: dict[str, Any] | None) -> list[bytes]:
    """One token row of request ``rid`` owned by ``owner``, finished or not."""
    row = BatchTokenIDOutput(
        rids=[rid], http_worker_ipcs=[owner], output_ids=[[65]], finished_reasons=[finished]
    )
    return [bytes(frame) for frame in frame_batch(row)]


class Running:
    """A detokenizer serving in a thread, fed through a PUSH the test owns."""

    def __init__(self, detokenizer: Detokenizer, feed: zmq.Socket[bytes]) -> None:
        self.detokenizer = detokenizer
        self.feed = feed

    def send(self, owner: str, rid: str, finished: dict[str, Any] | None = FINISHED) -> None:
        self.feed.send_multipart(token_batch(owner, rid, finished))

    def count(self, name: str, label: str) -> int:
        return self.detokenizer.counters.get(name, label)


@pytest.fixture
def start(
    context: zmq.Context[zmq.Socket[bytes]],
    run_dir: Path,
    default_tokenizer: Tokenizer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., Running]]:
    """Start a detokenizer with fast sweeps (and ``overrides``); stopped and joined at
    teardown."""
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    threads: list[tuple[Detokenizer, threading.Thread]] = []
    feeds: list[zmq.Socket[bytes]] = []

    def started(**overrides: Any) -> Running:
        options: dict[str, Any] = {
            "endpoint": f"ipc://{run_dir}/detok",
            "tokenizer": default_tokenizer,
            "destination_idle_s": IDLE_S,
            "evict_interval_s": SWEEP_S,
            "state_ttl_s": STATE_TTL_S,
            "backlog_limit": 5,
            "drain_timeout_s": 0.1,
            **overrides,
        }
        detokenizer = Detokenizer(DetokenizerSettings(**options), context)
        thread = threading.Thread(target=detokenizer.run, name="detokenizer", daemon=True)
        thread.start()
        threads.append((detokenizer, thread))
        feed = context.socket(zmq.PUSH)
        feed.setsockopt(zmq.LINGER, 0)
        feed.connect(options["endpoint"])
        feeds.append(feed)
        return Running(detokenizer, feed)

    yield started
    for feed in feeds:
        feed.close(linger=0)
    for detokenizer, thread in threads:
        detokenizer.request_stop()
        thread.join(10.0)
        assert not thread.is_alive(), "the detokenizer did not stop"


@pytest.fixture
def workers(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[dict[str, zmq.Socket[bytes]]]:
    """The test's worker PULLs by address; whichever are left are closed at teardown."""
    bound: dict[str, zmq.Socket[bytes]] = {}
    yield bound
    for sock in bound.values():
        sock.close(linger=0)


def bind_worker(
    context: zmq.Context[zmq.Socket[bytes]], workers: dict[str, zmq.Socket[bytes]], address: str
) -> zmq.Socket[bytes]:
    sock = context.socket(zmq.PULL)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(address)
    workers[address] = sock
    return sock


class TestIdleWorkerSockets:
    """Idle sockets to workers are closed; a worker with an open request keeps its socket."""

    def test_a_departed_workers_socket_is_closed(
        self,
        start: Callable[..., Running],
        context: zmq.Context[zmq.Socket[bytes]],
        workers: dict[str, zmq.Socket[bytes]],
        run_dir: Path,
    ) -> None:
        """A worker that got its finished request and went away loses its socket within
        the idle bound; the close is counted."""
        running = start()
        address = f"ipc://{run_dir}/w0"
        worker = bind_worker(context, workers, address)
        running.send(address, "r0")
        assert worker.poll(5000), "the worker never got its text"
        worker.recv_multipart()
        assert running.detokenizer.open_destinations == 1
        workers.pop(address).close(linger=0)
        wait_until(
            lambda: running.detokenizer.open_destinations == 0, CLOSE_BOUND_S, "socket closed"
        )
        assert running.count("destinations_closed", "idle") == 1

    def test_an_open_request_keeps_the_socket_until_its_state_expires(
        self, start: Callable[..., Running], run_dir: Path
    ) -> None:
        """A worker whose request has not finished keeps its socket past the idle bound;
        once the state expires (state_ttl_s) the socket closes too."""
        running = start()
        address = f"ipc://{run_dir}/w-open"
        sent = time.monotonic()
        running.send(address, "r-open", finished=None)
        wait_until(
            lambda: running.detokenizer.open_requests == 1, 5.0, "the request's state is held"
        )
        wait_until(
            lambda: running.detokenizer.open_destinations == 0,
            STATE_TTL_S + CLOSE_BOUND_S,
            "socket closed after the state expired",
        )
        assert time.monotonic() - sent >= STATE_TTL_S, "closed while the request was open"
        assert running.detokenizer.open_requests == 0
        assert running.count("evicted", "states") == 1
        assert running.count("destinations_closed", "idle") == 1

    def test_what_waits_for_a_departed_worker_is_bounded_and_counted(
        self, start: Callable[..., Running], run_dir: Path
    ) -> None:
        """Rows for a worker nobody serves queue up to backlog_limit, the rest drop as
        backlog_full; at the close the queue drops as destination_idle: every row counted."""
        running = start(backlog_limit=5)
        address = f"ipc://{run_dir}/never"
        rows = 12
        for index in range(rows):
            running.send(address, f"r{index}")

        def closed() -> bool:
            return running.count("destinations_closed", "idle") == 1

        wait_until(closed, CLOSE_BOUND_S + 3.0, "the departed worker's socket closed")
        assert running.detokenizer.open_destinations == 0
        assert running.count("dropped", "destination_idle") == 5
        assert running.count("dropped", "backlog_full") == rows - 5


class TestCap:
    """max_destinations bounds the sockets whatever their owners' state."""

    def test_never_more_sockets_than_the_cap(
        self, start: Callable[..., Running], run_dir: Path
    ) -> None:
        """Three workers, a cap of two: the longest idle is closed for the third."""
        running = start(max_destinations=2, destination_idle_s=60.0)
        for index in range(3):
            running.send(f"ipc://{run_dir}/cap-{index}", f"r{index}")
        wait_until(lambda: running.count("destinations_closed", "cap") == 1, 5.0, "one cap close")
        assert running.detokenizer.open_destinations == 2
