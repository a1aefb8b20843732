"""Operations and faults on two hosts: drain, a live weight update, killed processes.

The stack of :mod:`tests.integration.harness.multi_host` (control host and a worker host
with ``hosta-w0``/``hosta-w1``, network namespaces joined by veth pairs), driven through
the control host's admin API while clients stream through the worker host's port:

* ``switchboard drain hosta-w0 --wait`` under load: every stream exact, the drained
  worker safe to delete and taking no new request while its sibling takes every one
  (their request counts), ``undrain`` bringing it back;
* ``update_weights`` in each pause mode: both remote workers acknowledge the barrier, and
  every stream across it is the texts the one-host test allows;
* a remote worker SIGKILLed mid-stream: its clients' connections close within a bound,
  the control host marks it dead within the heartbeat timeout, the worker host's
  supervisor restarts it (after a backoff set longer than that timeout, so the dead mark
  is seen before the new process replaces it) and it serves again; its sibling's streams
  are all exact;
* a worker host's supervisor SIGKILLed: its worker dies with it (parent-death signal),
  the control host marks it dead within the heartbeat timeout, and a new worker host
  registers and serves.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator

import psutil
import pytest

from switchboard.text import load_tokenizer
from tests.integration.harness.http_worker import predictor
from tests.integration.harness.multi_host import (
    DEAD_WITHIN_S,
    DEADLINE_S,
    WORKER_IDS,
    Stack,
    multi_host_stack,
)
from tests.integration.harness.polling import wait_until
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import stream_outcomes
from tests.integration.harness.steady_load import SteadyLoad
from tests.integration.harness.timed_streams import TimedStreams
from tests.integration.harness.up_stop import gone
from tests.integration.harness.weight_load import Load, explains

pytestmark = pytest.mark.integration

__all__ = ["predictor"]

#: A crashed worker's restart waits longer than the router's heartbeat timeout (5 s) and
#: its margin, so the test sees the control host mark it dead before it comes back.
RESTART_AFTER_S = DEAD_WITHIN_S + 0.5
#: A killed worker's clients see their connections close (the kernel closes its sockets).
CLOSED_WITHIN_S = 2.0
#: Exact streams finished before and after an operation, so the load spans it.
AROUND = 16


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The two-host stack; its worker host restarts a crashed worker after
    :data:`RESTART_AFTER_S`."""
    backoff = ("--restart-backoff-initial-s", str(RESTART_AFTER_S))
    with multi_host_stack(tmp_path_factory, worker_extra=backoff) as built:
        yield built


def sent(stack: Stack) -> dict[str, int]:
    """Each remote worker's ``requests_sent`` as the control host lists it."""
    listed = stack.listed()
    return {worker: int(listed[worker]["requests_sent"]) for worker in WORKER_IDS}


def in_flight(stack: Stack) -> dict[str, int]:
    """Each remote worker's requests in flight as the control host lists it."""
    listed = stack.listed()
    return {worker: int(listed[worker]["inflight"]) for worker in WORKER_IDS}


def wait_sent(stack: Stack, load: SteadyLoad, more: int) -> None:
    before = load.snapshot().sent
    wait_until(lambda: load.snapshot().sent >= before + more, DEADLINE_S, "the load going on")


def test_drain_a_remote_worker_under_load(stack: Stack, predictor: Predictor) -> None:
    """Drain ``hosta-w0`` from the control host until safe to delete, hold it drained,
    undrain it: no client error, every text exact; while drained it took no request and
    ``hosta-w1`` took every one; undrained, it takes requests again."""
    victim, sibling = WORKER_IDS
    # A heartbeat brings the counts; a drained worker's count settles within one.
    heartbeat_s = 1.5
    url = stack.workers.base_url
    with SteadyLoad(url, predictor, clients=6, tokens=12, stem="mh-drain") as load:
        wait_sent(stack, load, AROUND)
        done = stack.cli("drain", victim, "--wait", "30", "--json")
        assert json.loads(done.stdout)["safe_to_delete"] is True, done.stdout
        assert done.stderr.splitlines()[-1] == f"{victim}: drained, safe to delete", done.stderr
        assert stack.listed()[victim]["safe_to_delete"] is True
        time.sleep(heartbeat_s)
        held = sent(stack)
        wait_sent(stack, load, AROUND)
        time.sleep(heartbeat_s)
        after = sent(stack)
        # No request reached the drained worker; its sibling took the load's (no error).
        assert after[victim] == held[victim], (held, after)
        assert after[sibling] - held[sibling] >= AROUND, (held, after)
        stack.cli("undrain", victim)
        wait_until(lambda: stack.states()[victim] == "serving", DEADLINE_S, "undrained")
        wait_until(
            lambda: sent(stack)[victim] > after[victim], DEADLINE_S, f"{victim} taking requests"
        )
        wait_sent(stack, load, AROUND)
    assert not load.tally.errors, load.tally.errors[:5]


def test_a_killed_remote_worker(stack: Stack, predictor: Predictor) -> None:
    """SIGKILL ``hosta-w0`` with streams in flight on both remote workers: its clients'
    connections close within :data:`CLOSED_WITHIN_S`, every stream on ``hosta-w1`` is
    exact, the control host marks it dead within the heartbeat timeout, and the worker
    host's supervisor starts it again: it registers and serves exactly."""
    victim, sibling = WORKER_IDS
    tokens = 1600  # 8 s at 5 ms a step: in flight through spreading them and the kill
    streams = TimedStreams(stack.workers.base_url, tokens, "mh-kill")
    try:
        inflight: dict[str, int] = {}

        def spread() -> bool:
            # The kernel hands each connection to either worker: add streams until both
            # hold some (the counts come with heartbeats).
            inflight.update(in_flight(stack))
            if sum(inflight.values()) != streams.started:
                return False
            if min(inflight.values()) >= 1:
                return True
            streams.add(4)
            return False

        # Nothing of the test before still counted in flight (counts come with heartbeats).
        wait_until(lambda: set(in_flight(stack).values()) == {0}, 5.0, "idle workers")
        streams.add(6)
        wait_until(spread, 5.0, lambda: f"streams on both workers: {inflight}", interval=0.3)
        old = stack.process(victim)
        old.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(
            lambda: stack.states()[victim] == "dead",
            DEAD_WITHIN_S,
            lambda: f"{victim} marked dead: {stack.states()}",
            interval=0.1,
        )
        assert stack.listed()[victim]["departure_reason"] == "dead_worker"
    finally:
        ended = streams.finish(DEADLINE_S)
    broken = [end for end in ended if end.problems(predictor, tokens)]
    exact = [end for end in ended if not end.problems(predictor, tokens)]
    # Only the victim's streams broke, each with its connection closed, soon after the
    # kill; the sibling's (as many as it held) are all exact.
    assert (len(broken), len(exact)) == (inflight[victim], inflight[sibling]), (
        inflight,
        len(exact),
        [(end.problems(predictor, tokens)[:1], end.at - killed_at) for end in broken],
    )
    assert all(end.failure is not None for end in broken), [
        e.problems(predictor, tokens) for e in broken
    ]
    assert max(end.at for end in broken) - killed_at < CLOSED_WITHIN_S
    wait_until(
        lambda: stack.states()[victim] == "serving" and stack.process(victim).pid != old.pid,
        DEADLINE_S,
        lambda: f"{victim} restarted and serving: {stack.states()}",
    )
    rounds = iter(range(1000))

    def served_again() -> bool:
        # Either worker may accept any connection: stream until the new process took some.
        stem = f"mh-again-{next(rounds)}"
        again = asyncio.run(stream_outcomes(stack.workers.base_url, predictor, 4, 12, stem))
        assert again == ["exact"] * 4, again
        return sent(stack)[victim] > 0

    wait_until(served_again, DEADLINE_S, f"the new {victim} serving", interval=0.2)


def test_a_killed_worker_host_supervisor(stack: Stack, predictor: Predictor) -> None:
    """SIGKILL a worker host's supervisor: its worker dies with it, nothing of it is left
    running, the control host marks the worker dead within the heartbeat timeout; a new
    worker host started afterwards registers and serves exactly."""
    worker = "hostb-w0"
    with stack.worker_host("hostb-w", 1) as host:
        wait_until(lambda: stack.states([worker])[worker] == "serving", DEADLINE_S, worker)
        processes = [psutil.Process(host.supervisor.pid), *host.descendants()]
        host.supervisor.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(
            lambda: all(gone(process) for process in processes),
            5.0,
            lambda: f"every process of the worker host gone: {processes}",
        )
        wait_until(
            lambda: stack.states([worker])[worker] == "dead",
            DEAD_WITHIN_S + killed_at - time.monotonic(),
            lambda: f"{worker} marked dead: {stack.states([worker])}",
            interval=0.1,
        )
    with stack.worker_host("hostb-w", 1) as host:
        wait_until(lambda: stack.states([worker])[worker] == "serving", DEADLINE_S, worker)
        outcomes = asyncio.run(stream_outcomes(host.base_url, predictor, 4, 12, "mh-new-host"))
        assert outcomes == ["exact"] * 4, outcomes


def test_a_weight_update_spans_both_hosts(stack: Stack) -> None:
    """``update_weights`` in each pause mode under streaming load through the worker host:
    both remote workers acknowledge the pause, every text is the versions' (a stream
    across a swap: old tokens then new; aborted in ``abort`` mode, all old). Last in the
    module: the engine serves other weights afterwards."""
    tokenizer = load_tokenizer()
    with stack.control.client() as client:
        chain = [str(client.get("/api/load").json()["load"]["weight_version"]) or "default"]
    with (
        Load(stack.workers.base_url, "mh-swap") as load,
        stack.control.client(timeout=90) as client,
    ):
        for mode in ("retract", "in_place", "abort"):
            time.sleep(0.6)
            version = f"mh-{mode}"
            answer = client.post(
                "/api/update_weights", json={"version": version, "mode": mode, "timeout_s": 10}
            )
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert body["paused"]["complete"] and body["resumed"]["complete"], body
            assert set(WORKER_IDS) <= set(body["paused"]["acked"]), body["paused"]
            assert set(WORKER_IDS) <= set(body["resumed"]["acked"]), body["resumed"]
            chain.append(version)
        time.sleep(0.6)
    assert load.failures == []
    problems = [p for p in (explains(tokenizer, done, chain) for done in load.done) if p]
    assert problems == [], problems[:5]
    assert set(chain[1:]) <= {done.meta["weight_version"] for done in load.done}
    aborted = [d for d in load.done if d.meta["finish_reason"]["type"] == "abort"]
    # Only the abort-mode swap aborts: the requests it caught ran on the weights before it.
    assert aborted, "the abort-mode swap caught no request in flight"
    assert {d.meta["weight_version"] for d in aborted} == {"mh-in_place"}
