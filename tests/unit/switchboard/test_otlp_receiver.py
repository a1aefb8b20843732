"""Tests for the local OTLP/HTTP receiver: real HTTP on loopback, exports built by the SDK."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind

from switchboard.otlp_receiver import TRACES_PATH, OtlpReceiver, ReceivedLink

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def made_spans() -> list[ReadableSpan]:
    """A parent and a child linked to it, from a real SDK provider."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "switchboard-engine", "service.instance.id": "engine"}
        ),
        shutdown_on_exit=False,
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("parent", kind=SpanKind.SERVER) as parent:
        link = Link(parent.get_span_context())
        with tracer.start_as_current_span("child", links=[link], attributes={"rows": 2}):
            pass
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture
def body() -> bytes:
    """One serialized ExportTraceServiceRequest of :func:`made_spans`."""
    return bytes(encode_spans(made_spans()).SerializeToString())


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def post(receiver: OtlpReceiver, content: bytes, **headers: str) -> httpx.Response:
    url = f"{receiver.endpoint}{TRACES_PATH}"
    return httpx.post(url, content=content, headers={**PROTOBUF, **headers}, trust_env=False)


class TestReceiver:
    """Exports are decoded into spans with ids, parents, links and resource names."""

    @pytest.mark.parametrize(
        ("encode", "encoding"),
        [(lambda b: b, None), (gzip.compress, "gzip"), (zlib.compress, "deflate")],
    )
    def test_decodes_export(
        self,
        receiver: OtlpReceiver,
        body: bytes,
        encode: Callable[[bytes], bytes],
        encoding: str | None,
    ) -> None:
        """Plain, gzip and deflate bodies answer 200 with a response and decode alike."""
        headers = {"Content-Encoding": encoding} if encoding else {}
        response = post(receiver, encode(body), **headers)
        assert response.status_code == 200
        ExportTraceServiceResponse().ParseFromString(response.content)
        child, parent = receiver.spans()
        assert (parent.name, parent.kind, parent.parent_span_id) == ("parent", "server", "")
        assert child.parent_span_id == parent.span_id and child.trace_id == parent.trace_id
        assert child.links == (ReceivedLink(parent.trace_id, parent.span_id),)
        assert (child.service_name, child.service_instance_id) == ("switchboard-engine", "engine")
        assert child.attributes == {"rows": 2} and receiver.exports == 1

    def test_discard_mode_keeps_nothing(self, body: bytes) -> None:
        """A discarding receiver answers 200 and keeps no span."""
        with OtlpReceiver(discard=True) as sink:
            assert post(sink, body).status_code == 200
            assert sink.spans() == [] and sink.exports == 1

    def test_refusals(self, receiver: OtlpReceiver, body: bytes) -> None:
        """Another path is 404, JSON 415, an undecodable body 400; nothing is kept."""
        assert httpx.post(f"{receiver.endpoint}/v1/logs", content=body).status_code == 404
        assert post(receiver, body, **{"Content-Type": "application/json"}).status_code == 415
        assert post(receiver, b"\xff\x00garbage").status_code == 400
        assert receiver.spans() == [] and receiver.exports == 0

    def test_wait_for_deadline(self, receiver: OtlpReceiver) -> None:
        """wait_for raises TimeoutError when the spans never come."""
        with pytest.raises(TimeoutError, match="0 spans"):
            receiver.wait_for(bool, timeout_s=0.05)

    def test_loopback_only(self) -> None:
        """A non-loopback host is refused before binding."""
        with pytest.raises(ValueError, match="loopback"):
            OtlpReceiver(host="0.0.0.0")
