"""A stack on two hosts: network namespaces joined by a veth pair, link-local addresses.

The control host (``switchboard up --role control`` in one namespace) runs the router,
the worker gateway, the engine, the detokenizers and the admin app; the worker host
(``switchboard up --role workers`` in the other) runs two HTTP workers that reach the
control host only through the gateway, over tcp with CURVE. The test reaches both over
veth pairs of its own, so it still sees each host while the link between them is down.

Streams through the worker host read exactly the engine's text; a worker with an unlisted
key is refused and counted; a pause spans both hosts; a request through the worker host
is one trace, its worker's spans exported from the worker host and the rest from the
control host, each to a receiver on the test's end of that host's veth pair (link-local,
so the worker host reaches it without the control host); taking the link down ends the
remote workers' in-flight requests with a clear error and marks them dead within the
heartbeat timeout, and bringing it up brings them back, serving exactly again.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from switchboard.otlp_receiver import ReceivedLink, ReceivedSpan
from tests.integration.harness.curve_keys import assert_intruder_refused
from tests.integration.harness.http_stack import free_port
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
from tests.integration.harness.scrape import sample_sum, scrape
from tests.integration.harness.sse import StreamThread, stream_outcomes

pytestmark = pytest.mark.integration

__all__ = ["predictor"]

#: The ZMTP heartbeat timeout (3 s) after which a worker sees its connection lost, and a margin.
ENDED_WITHIN_S = 3.0 + 3.0
#: The control host's roles on the path of a generation, as their ``service.name``.
CONTROL_SERVICES = frozenset(
    {
        "switchboard-tokenizer-router",
        "switchboard-engine",
        "switchboard-detokenizer-router",
        "switchboard-detokenizer",
    }
)
#: Spans made once per output batch, each parented on and linked to the engine's span.
BATCH_SPANS = frozenset(
    {
        "engine emit_batch",
        "detokenizer-router route_batch",
        "detokenizer detokenize_batch",
        "worker receive_outputs",
    }
)
EXPECTED_SPANS = BATCH_SPANS | {"tokenizer-router forward", "engine request"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The control host and a two-worker worker host, each in its own namespace, each
    exporting its spans to a receiver of its own."""
    with multi_host_stack(tmp_path_factory, traced=True) as built:
        yield built


class TestTwoHosts:
    def test_streams_through_the_worker_host_are_exact(
        self, stack: Stack, predictor: Predictor
    ) -> None:
        """Concurrent streams through the worker host's port all read the engine's text;
        the control host lists both remote workers at their gateway return addresses."""
        outcomes = asyncio.run(
            stream_outcomes(stack.workers.base_url, predictor, 16, 12, "two-hosts")
        )
        assert outcomes == ["exact"] * 16, outcomes
        listed = stack.listed()
        control_metrics = scrape(stack.control)
        for worker in WORKER_IDS:
            assert listed[worker]["endpoint"].endswith(f"/remote-{worker}")
            labels = {"worker": worker, "host": socket.gethostname()}
            assert sample_sum(control_metrics, "switchboard_worker_up", **labels) == 1

        # The worker host's own families are served on its port, for the whole host.
        def generated_tokens() -> float:
            with httpx.Client(trust_env=False, timeout=10.0) as client:
                answer = client.get(f"{stack.workers.base_url}/metrics")
            assert answer.status_code == 200
            return sample_sum(answer.text, "switchboard_generation_tokens_total")

        wait_until(lambda: generated_tokens() >= 16 * 12, DEADLINE_S, "the worker host's tokens")

    def test_a_pause_spans_both_hosts(self, stack: Stack) -> None:
        """The engine on the control host and both workers on the worker host acknowledge."""
        with stack.control.client() as client:
            paused = client.post("/api/pause", json={"mode": "in_place", "timeout_s": 5})
            assert paused.status_code == 200, paused.text
            try:
                assert set(WORKER_IDS) <= set(paused.json()["acked"]), paused.json()
                assert set(stack.states().values()) == {"paused"}
            finally:
                resumed = client.post("/api/continue", json={"timeout_s": 5})
                assert resumed.status_code == 200, resumed.text

    def test_one_trace_per_request_across_hosts(self, stack: Stack) -> None:
        """A request through the worker host carrying a traceparent is one trace: its
        worker's spans arrive from the worker host, the routers', engine's and
        detokenizer's from the control host, each span parented within the trace."""
        trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
        body = {"text": "traced across", "sampling_params": {"max_new_tokens": 4}}
        headers = {"traceparent": f"00-{trace_id}-{caller}-01"}
        read = StreamThread(stack.workers.base_url, {**body, "stream": True}, headers=headers)
        assert read.start().finish(DEADLINE_S).completion_tokens == 4
        by_host: dict[str, list[ReceivedSpan]] = {}

        def arrived() -> bool:
            for host, receiver in stack.receivers.items():
                by_host[host] = [s for s in receiver.spans() if s.trace_id == trace_id]
            names = {span.name for spans in by_host.values() for span in spans}
            return names >= EXPECTED_SPANS and any(
                span.kind == "server" for span in by_host["workers"]
            )

        wait_until(arrived, DEADLINE_S, lambda: f"the trace's spans: {by_host}")
        worker, control = by_host["workers"], by_host["control"]
        assert {span.service_name for span in worker} == {"switchboard-worker"}
        assert {span.service_name for span in control} == CONTROL_SERVICES
        trace = [*worker, *control]
        ours = {span.span_id for span in trace}
        assert all(span.parent_span_id in ours | {caller} for span in trace)
        (http,) = [span for span in worker if span.kind == "server"]
        assert (http.name, http.parent_span_id) == ("worker POST /generate", caller)
        (forward,) = [span for span in control if span.name == "tokenizer-router forward"]
        assert forward.parent_span_id in {span.span_id for span in worker}
        (engine,) = [span for span in control if span.name == "engine request"]
        assert engine.parent_span_id == forward.span_id
        for span in (s for s in trace if s.name in BATCH_SPANS):
            assert span.parent_span_id == engine.span_id, span
            assert span.links == (ReceivedLink(trace_id, engine.span_id),), span

    def test_an_unlisted_key_is_refused_and_counted(self, stack: Stack) -> None:
        """A worker on the worker host with a key the control host does not list exits 2,
        saying so, and the gateway counts the refusal."""

        argv = (
            *stack.hosts.launcher(stack.hosts.workers_ns),
            *(sys.executable, "-m", "switchboard.cli", "worker"),
            *("--worker-id", "intruder0", "--port", str(free_port())),
            *stack.keys.worker_args(stack.gateway, "intruder", stack.stack_key),
        )
        assert_intruder_refused(stack.control, argv, "intruder0", stack.listed)

    def test_link_down_ends_in_flight_clearly_and_up_brings_them_back(
        self, stack: Stack, predictor: Predictor
    ) -> None:
        """Link down mid-stream: every stream ends (exact, or with a clear
        control_unreachable error) within the ZMTP heartbeat timeout, the control host
        marks both remote workers dead within the router's heartbeat timeout, and the
        worker host's /health says 503. Link up: both serve again, exactly."""

        async def across_the_cut() -> tuple[list[Any], float]:
            running = asyncio.create_task(
                stream_outcomes(stack.workers.base_url, predictor, 6, 1000, "cut")
            )
            await asyncio.sleep(1.0)
            stack.hosts.cut()
            cut_at = time.monotonic()
            outcomes = await asyncio.wait_for(running, 30)
            return outcomes, time.monotonic() - cut_at

        try:
            cut_at = time.monotonic()
            outcomes, ended_after = asyncio.run(across_the_cut())
            unclear = [
                outcome
                for outcome in outcomes
                if outcome != "exact" and "control_unreachable" not in str(outcome)
            ]
            assert not unclear, outcomes
            assert "exact" not in outcomes, "1000 tokens at 5 ms should outlast the cut"
            assert ended_after < ENDED_WITHIN_S, f"streams ended {ended_after:.1f} s after"
            wait_until(
                lambda: set(stack.states().values()) <= {"dead", "None"},
                DEAD_WITHIN_S + cut_at - time.monotonic() + 1.0,
                lambda: f"both remote workers dead: {stack.states()}",
            )
            with httpx.Client(trust_env=False, timeout=5.0) as client:
                health = client.get(f"{stack.workers.base_url}/health")
            assert health.status_code == 503, health.text
        finally:
            stack.hosts.mend()
        wait_until(
            lambda: set(stack.states().values()) == {"serving"},
            DEADLINE_S,
            lambda: f"both remote workers serving again: {stack.states()}\n{stack.logs()}",
        )
        wait_until(
            lambda: (
                asyncio.run(stream_outcomes(stack.workers.base_url, predictor, 8, 12, "mended"))
                == ["exact"] * 8
            ),
            DEADLINE_S,
            "exact streams after the link came back",
            interval=0.5,
            retry_on=(httpx.HTTPError,),
        )
