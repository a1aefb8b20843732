"""One streaming request through a real ``switchboard up`` stack is one trace in an OTLP receiver.

Every process exports over OTLP/HTTP (protobuf) to a local
:class:`~switchboard.otlp_receiver.OtlpReceiver`, which decodes what it gets; the test
then checks the trace's shape: every role took part, each span has the right parent, and
each batch span is parented on and linked to the request's engine span. With no endpoint
configured, nothing at all is exported.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from switchboard.otlp_receiver import OtlpReceiver, ReceivedLink, ReceivedSpan
from tests.integration.harness.admin_stack import AdminStack, admin_stack

pytestmark = pytest.mark.integration

#: Every role on the path of a generation, as its ``service.name``.
PATH_SERVICES = frozenset(
    {
        "switchboard-worker",
        "switchboard-tokenizer-router",
        "switchboard-engine",
        "switchboard-detokenizer-router",
        "switchboard-detokenizer",
    }
)
#: Spans made once per output batch; with one request in flight each batch has one row.
BATCH_SPANS = frozenset(
    {
        "engine emit_batch",
        "detokenizer-router route_batch",
        "detokenizer detokenize_batch",
        "worker receive_outputs",
    }
)
#: The spans that must be in the trace before it is checked (the worker's server span is
#: found by kind, so that a misnamed one fails on its name, not on a timeout).
EXPECTED = BATCH_SPANS | {"tokenizer-router forward", "engine request"}
#: The OTLP/HTTP default port, where an exporter with no endpoint configured would send.
OTLP_DEFAULT_PORT = 4318
EXPORT_WAIT_S = 30.0


@pytest.fixture(autouse=True)
def clean_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_* variable of the test run reaches the stack unless a test sets it."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def stream_generate(stack: AdminStack, traceparent: str) -> list[str]:
    """One streaming ``POST /generate`` carrying ``traceparent``; its SSE data lines."""
    body = {"text": "tell me", "sampling_params": {"max_new_tokens": 4}, "stream": True}
    lines = []
    with (
        httpx.Client(base_url=stack.base_url, timeout=30.0, trust_env=False) as client,
        client.stream("POST", "/generate", json=body, headers={"traceparent": traceparent}) as r,
    ):
        assert r.status_code == 200, r.read()
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and len(lines) >= 2, lines
    assert json.loads(lines[-2].removeprefix("data: "))["meta_info"]["completion_tokens"] == 4
    return lines


def names_in(trace_id: str) -> Callable[[list[ReceivedSpan]], bool]:
    """A predicate: the trace ``trace_id`` holds every span of :data:`EXPECTED`."""

    def complete(spans: list[ReceivedSpan]) -> bool:
        in_trace = [span for span in spans if span.trace_id == trace_id]
        return {span.name for span in in_trace} >= EXPECTED and any(
            span.kind == "server" for span in in_trace
        )

    return complete


def only(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    """The one span called ``name``."""
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, [(span.name, span.span_id) for span in found]
    return found[0]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


class TestTraceAcrossTheStack:
    """An incoming traceparent yields one trace over every process, with parents and links."""

    @pytest.fixture
    def traced(
        self, log_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> Iterator[tuple[AdminStack, OtlpReceiver]]:
        """A receiver, and a stack told to export to it (``--otlp-endpoint``; standard
        OTEL_* variables pass through: quick batches) until both are stopped."""
        with OtlpReceiver() as receiver:
            monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
            endpoint = ("--otlp-endpoint", receiver.endpoint)
            with admin_stack(log_dir, workers=1, extra_args=endpoint) as stack:
                yield stack, receiver
            # Stopped: every process flushed its spans on the way out.

    def test_one_trace_with_parents_and_links(
        self, traced: tuple[AdminStack, OtlpReceiver]
    ) -> None:
        """Worker, routers, engine and detokenizer spans join the caller's trace correctly."""
        stack, receiver = traced
        trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
        stream_generate(stack, f"00-{trace_id}-{caller_span}-01")
        spans = receiver.wait_for(names_in(trace_id), EXPORT_WAIT_S)
        trace = [span for span in spans if span.trace_id == trace_id]
        ours = {span.span_id for span in trace}

        assert {span.service_name for span in trace} >= PATH_SERVICES
        # Every process on the path made spans of this trace only: one request, one trace.
        on_path = [s for s in spans if s.service_name in PATH_SERVICES - {"switchboard-worker"}]
        assert {span.trace_id for span in on_path} == {trace_id}
        # A tree under the caller's span: no span hangs off something outside the trace.
        assert all(span.parent_span_id in ours | {caller_span} for span in trace)

        (http,) = [span for span in trace if span.kind == "server"]
        assert (http.service_name, http.name) == ("switchboard-worker", "worker POST /generate")
        assert http.parent_span_id == caller_span

        forward = only(trace, "tokenizer-router forward")
        assert forward.service_name == "switchboard-tokenizer-router"
        worker_spans = {s.span_id for s in trace if s.service_name == "switchboard-worker"}
        assert forward.parent_span_id in worker_spans

        engine = only(trace, "engine request")
        assert (engine.service_name, engine.service_instance_id) == (
            "switchboard-engine",
            "engine",
        )
        assert engine.parent_span_id == forward.span_id

        engine_link = (ReceivedLink(trace_id, engine.span_id),)
        batches = [span for span in trace if span.name in BATCH_SPANS]
        assert {span.name for span in batches} == BATCH_SPANS
        for span in batches:
            assert span.parent_span_id == engine.span_id, span
            assert span.links == engine_link, span
        detokenizers = {s.service_instance_id for s in batches if s.name.startswith("detokenizer ")}
        assert len(detokenizers) == 1 and detokenizers <= {"detokenizer-0", "detokenizer-1"}


class TestTracingOff:
    """Without an OTLP endpoint no process exports anything."""

    def test_nothing_exported_without_endpoint(self, log_dir: Path) -> None:
        """A receiver at the OTLP default port gets no export from a stack serving a request."""
        try:
            receiver = OtlpReceiver(port=OTLP_DEFAULT_PORT).start()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            pytest.fail(f"port {OTLP_DEFAULT_PORT} is taken: the check needs the default port")
        try:
            with admin_stack(log_dir, workers=1) as stack:
                trace_id = secrets.token_hex(16)
                stream_generate(stack, f"00-{trace_id}-{secrets.token_hex(8)}-01")
            # The stack has stopped: any exporter would have flushed by now.
            assert receiver.exports == 0
        finally:
            receiver.stop()
