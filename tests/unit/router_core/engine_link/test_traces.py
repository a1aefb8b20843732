"""Tests for the engine link's spans: a request span per traced request, ended when it
finishes, and the link stamping its rows with them, with an in-memory exporter."""

from __future__ import annotations

from itertools import count

import pytest
import zmq
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router_core.engine_link import EngineEndpoints, EngineLink, Request
from router_core.engine_link.traces import RequestSpans
from router_core.wire import Kind, decode_header, frame_message
from router_core.wire.outputs import BatchTokenIDOutput
from router_core.wire.requests import AbortRequest, GenerateRequest
from tests.support.eventually import wait_until
from tests.unit.router_core.recorded_spans import SAMPLED, finished, ids

OWNER = "ipc:///tmp/sb-unit/worker-w0"
WAIT_MS = 2000
_names = count()

pytestmark = pytest.mark.usefixtures("no_tracing_environment")


def generate_request(rid: str, traceparent: str = SAMPLED, owner: str = OWNER) -> Request:
    return Request(
        kind=Kind.GENERATE,
        payload=GenerateRequest(rid=rid, input_ids=[1]),
        rid=rid,
        reply_to=owner,
        traceparent=traceparent,
    )


def token_rows(rids: list[str], finished: list[bool]) -> BatchTokenIDOutput:
    return BatchTokenIDOutput(
        rids=rids,
        http_worker_ipcs=[OWNER] * len(rids),
        finished_reasons=[{"type": "length"} if done else None for done in finished],
        output_ids=[[5]] * len(rids),
    )


class TestRequestSpans:
    """The engine's request spans: started per traced request, ended when it finishes."""

    def test_request_span_lifecycle(self, exporter: InMemorySpanExporter) -> None:
        """A traced request gets a child span whose context its rows carry until it ends."""
        spans = RequestSpans()
        seen = spans.on_request(generate_request("a"))
        spans.on_request(generate_request("b", traceparent=""))
        assert ids(seen.traceparent)[0] == ids(SAMPLED)[0] and seen.traceparent != SAMPLED
        assert spans.row_traces(token_rows(["b", "a"], [False, False])) == ["", seen.traceparent]
        spans.finish(token_rows(["a"], [True]))
        assert len(spans) == 0 and spans.row_traces(token_rows(["a"], [False])) == []
        span = finished(exporter)["engine request"]
        assert span.parent is not None and span.parent.span_id == ids(SAMPLED)[1]
        assert span.attributes is not None and span.attributes["switchboard.outcome"] == "length"

    def test_abort_all_and_close_end_spans(self, exporter: InMemorySpanExporter) -> None:
        """abort_all ends every span of its owner; close ends the rest."""
        spans = RequestSpans()
        for rid in ("a", "b"):
            spans.on_request(generate_request(rid))
        spans.on_request(generate_request("c", owner="ipc:///tmp/sb-unit/worker-w1"))
        abort = Request(
            kind=Kind.ABORT, payload=AbortRequest(abort_all=True), rid="", reply_to=OWNER
        )
        spans.on_request(abort)
        assert len(spans) == 1
        spans.close()
        outcomes = sorted(
            str((span.attributes or {})["switchboard.outcome"])
            for span in exporter.get_finished_spans()
        )
        assert outcomes == ["abort", "abort", "closed"]

    def test_open_spans_are_bounded(self, exporter: InMemorySpanExporter) -> None:
        """Beyond the limit the oldest request span is ended (evicted)."""
        spans = RequestSpans(limit=2)
        for rid in ("a", "b", "c"):
            spans.on_request(generate_request(rid))
        assert len(spans) == 2
        (evicted,) = exporter.get_finished_spans()
        assert evicted.attributes is not None
        assert evicted.attributes["switchboard.outcome"] == "evicted"


class TestEngineLinkTracing:
    """The engine link fills row_traces and makes the emit span by itself."""

    def test_link_traces_rows(
        self, exporter: InMemorySpanExporter, context: zmq.Context[zmq.Socket[bytes]]
    ) -> None:
        """A traced request's rows carry its engine span; emit_batch is parented on it."""
        n = next(_names)
        endpoints = EngineEndpoints(
            inbound=f"inproc://tr-engine-{n}",
            events=f"inproc://tr-events-{n}",
            outputs=f"inproc://tr-out-{n}",
        )
        outputs = context.socket(zmq.PULL)
        outputs.bind(endpoints.outputs)
        events = context.socket(zmq.PULL)
        events.bind(endpoints.events)
        requests = context.socket(zmq.PUSH)
        try:
            with EngineLink(endpoints, context=context) as link:
                requests.connect(endpoints.inbound)
                request = GenerateRequest(rid="r1", input_ids=[1])
                requests.send_multipart(
                    frame_message(
                        Kind.GENERATE, request, rids=["r1"], reply_to=[OWNER], traceparent=SAMPLED
                    )
                )
                items = wait_until(lambda: link.poll(50), WAIT_MS / 1000, "the request")
                (item,) = items
                assert isinstance(item, Request)
                assert link.send_batch(token_rows(["r1"], [True]))
                assert outputs.poll(WAIT_MS)
                header = decode_header(outputs.recv_multipart()[0])
        finally:
            for sock in (outputs, events, requests):
                sock.close(linger=0)
        assert header.row_traces == [item.traceparent]
        spans = finished(exporter)
        engine, emit = spans["engine request"], spans["engine emit_batch"]
        assert emit.parent is not None and emit.parent.span_id == engine.context.span_id
        assert [link.context.span_id for link in emit.links] == [engine.context.span_id]
        assert engine.end_time is not None and emit.end_time is not None
        assert engine.end_time >= emit.end_time
