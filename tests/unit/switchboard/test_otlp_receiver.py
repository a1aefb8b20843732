"""Tests for the local OTLP/HTTP receiver: real HTTP on loopback, exports built by the SDK."""

from __future__ import annotations

import gzip
import json
import re
import select
import shutil
import signal
import subprocess
import sys
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

    @pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "169.255.0.1", "fe00::1"])
    def test_loopback_or_link_local_only(self, host: str) -> None:
        """A host neither loopback nor link-local is refused before binding."""
        with pytest.raises(ValueError, match="loopback or link-local"):
            OtlpReceiver(host=host)

    @pytest.mark.parametrize("host", ["localhost", "127.0.0.2", "169.254.20.9", "[fe80::1]"])
    def test_link_local_is_allowed(self, host: str) -> None:
        """Loopback and link-local hosts are accepted (binding is left to start())."""
        assert OtlpReceiver(host=host).host == host


class TestCommand:
    """``python -m switchboard.otlp_receiver``: its stdout is JSON lines only."""

    def test_stdout_is_json_lines_only(self, body: bytes) -> None:
        """The banner goes to stderr; every stdout line parses as JSON (json.loads, and
        jq where installed), one per span, and Ctrl-C ends it with 0."""
        command = [sys.executable, "-m", "switchboard.otlp_receiver", "--port", "0"]
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as process:
            try:
                assert process.stderr is not None
                # A deadline on the banner: a receiver writing it elsewhere fails, not hangs.
                ready, _, _ = select.select([process.stderr], [], [], 10.0)
                assert ready, "no banner on stderr within 10 s"
                banner = process.stderr.readline()
                found = re.fullmatch(
                    r"OTLP/HTTP receiver at (http://127\.0\.0\.1:\d+)/v1/traces\n", banner
                )
                assert found, banner
                url = f"{found.group(1)}{TRACES_PATH}"
                response = httpx.post(url, content=body, headers=PROTOBUF, trust_env=False)
                assert response.status_code == 200
            finally:
                process.send_signal(signal.SIGINT)
            try:
                out, err = process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()  # never a wait without a bound, even in a failing test
                out, err = process.communicate()
                raise AssertionError(f"still running 10 s after SIGINT; stderr: {err}") from None
        assert process.returncode == 0, err
        assert [json.loads(line)["name"] for line in out.splitlines()] == ["child", "parent"]
        if (jq := shutil.which("jq")) is not None:
            names = subprocess.run(
                [jq, "-r", ".name"], check=False, input=out, capture_output=True, text=True
            )
            assert (names.returncode, names.stdout) == (0, "child\nparent\n"), names.stderr
