"""A small local OTLP/HTTP trace receiver: ``POST /v1/traces`` decoded into memory.

Enough of an OpenTelemetry backend to check what a stack exports without installing one.
It decodes each ``ExportTraceServiceRequest`` (protobuf, plain, gzip or deflate
compressed) into :class:`ReceivedSpan` records and answers ``200`` with an empty
``ExportTraceServiceResponse``; a ``discard`` receiver answers ``200`` without decoding
(a sink for benchmarks). It binds loopback or a link-local address only (a link-local
address is never routed off its link: a test reaches network namespaces it made through
one), port 0 by default, and serves from a thread::

    with OtlpReceiver() as receiver:          # listening from here
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        ...
        spans = receiver.wait_for(lambda spans: len(spans) >= 5, timeout_s=10)

``python -m switchboard.otlp_receiver [--port 4318]`` prints one JSON line per span on
stdout and nothing else there (its banner goes to stderr), so ``| jq`` reads it whole.
"""

from __future__ import annotations

import argparse
import gzip
import ipaddress
import json
import signal
import sys
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from router_core.endpoints import is_loopback_host

__all__ = ["TRACES_PATH", "OtlpReceiver", "ReceivedLink", "ReceivedSpan", "main"]

#: Where OTLP/HTTP exporters post traces (the endpoint plus this path).
TRACES_PATH: Final = "/v1/traces"
#: The largest export body accepted (the SDK's batches are far smaller).
MAX_BODY_BYTES: Final = 64 * 1024 * 1024

_KINDS: Final = {
    Span.SPAN_KIND_INTERNAL: "internal",
    Span.SPAN_KIND_SERVER: "server",
    Span.SPAN_KIND_CLIENT: "client",
    Span.SPAN_KIND_PRODUCER: "producer",
    Span.SPAN_KIND_CONSUMER: "consumer",
}


@dataclass(frozen=True)
class ReceivedLink:
    """A span link: the linked span's ids, lowercase hex."""

    trace_id: str
    span_id: str


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span; ids are lowercase hex, ``parent_span_id`` ``""`` for a root."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    links: tuple[ReceivedLink, ...]
    service_name: str
    service_instance_id: str
    attributes: dict[str, Any]
    start_unix_ns: int
    end_unix_ns: int


def decode_export(body: bytes) -> list[ReceivedSpan]:
    """The spans of one serialized ``ExportTraceServiceRequest`` (protobuf ``DecodeError``
    for a body that is not one)."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=_KINDS.get(span.kind, "unspecified"),
                        links=tuple(
                            ReceivedLink(link.trace_id.hex(), link.span_id.hex())
                            for link in span.links
                        ),
                        service_name=str(resource.get("service.name", "")),
                        service_instance_id=str(resource.get("service.instance.id", "")),
                        attributes=_attributes(span.attributes),
                        start_unix_ns=span.start_time_unix_nano,
                        end_unix_ns=span.end_time_unix_nano,
                    )
                )
    return spans


def _attributes(pairs: Sequence[Any]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which)


class OtlpReceiver:
    """Listens on ``host:port`` (loopback or link-local only) while open; keeps what it
    decodes.

    ``on_spans`` (optional) is called from the serving thread with each export's spans.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        discard: bool = False,
        on_spans: Callable[[list[ReceivedSpan]], None] | None = None,
    ) -> None:
        if not (is_loopback_host(host) or _is_link_local(host)):
            raise ValueError(f"the OTLP receiver binds loopback or link-local only, not {host!r}")
        self.host = host
        self.port = port
        self.discard = discard
        self._on_spans = on_spans
        self._spans: list[ReceivedSpan] = []
        self._exports = 0
        self._changed = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """The base URL to give ``OTEL_EXPORTER_OTLP_ENDPOINT`` (no path)."""
        return f"http://{self.host}:{self.port}"

    @property
    def exports(self) -> int:
        """Export requests answered 200 so far."""
        return self._exports

    def spans(self) -> list[ReceivedSpan]:
        """A copy of every span received, in arrival order (empty in discard mode)."""
        with self._changed:
            return list(self._spans)

    def clear(self) -> None:
        """Forget the spans received so far."""
        with self._changed:
            self._spans.clear()

    def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout_s: float
    ) -> list[ReceivedSpan]:
        """Wait until ``predicate(spans)`` holds, then return the spans; ``TimeoutError``
        (naming what arrived) at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate(self._spans):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    names = sorted({(s.service_name, s.name) for s in self._spans})
                    raise TimeoutError(f"{len(self._spans)} spans received: {names}")
                self._changed.wait(remaining)
            return list(self._spans)

    def start(self) -> OtlpReceiver:
        """Bind and serve from a daemon thread; ``port`` becomes the bound port."""
        if self._server is not None:
            raise RuntimeError("the receiver is already running")
        server = ThreadingHTTPServer((self.host, self.port), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self.port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever, name="otlp-receiver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _accept(self, spans: list[ReceivedSpan]) -> None:
        with self._changed:
            self._exports += 1
            self._spans.extend(spans)
            self._changed.notify_all()
        if self._on_spans is not None and spans:
            self._on_spans(spans)


def _is_link_local(host: str) -> bool:
    """Whether ``host`` is a link-local address (169.254.0.0/16, fe80::/10)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_link_local
    except ValueError:
        return False


def _handler_for(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class ExportHandler(BaseHTTPRequestHandler):
        """``POST /v1/traces`` only; 404 elsewhere, 415/400/413 for bodies we refuse."""

        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != TRACES_PATH:
                self._reply(HTTPStatus.NOT_FOUND, b"")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self.close_connection = True
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b"")
                return
            body = self.rfile.read(length)
            if receiver.discard:
                receiver._accept([])
                self._reply(HTTPStatus.OK, ExportTraceServiceResponse().SerializeToString())
                return
            if "protobuf" not in self.headers.get("Content-Type", ""):
                self._reply(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, b"")
                return
            try:
                spans = decode_export(_decompress(body, self.headers.get("Content-Encoding")))
            except Exception:  # any undecodable body is the sender's fault: 400
                self._reply(HTTPStatus.BAD_REQUEST, b"")
                return
            receiver._accept(spans)
            self._reply(HTTPStatus.OK, ExportTraceServiceResponse().SerializeToString())

        def _reply(self, status: HTTPStatus, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: one line per export would drown a test's output."""

    return ExportHandler


def _decompress(body: bytes, encoding: str | None) -> bytes:
    encoding = (encoding or "identity").strip().lower()
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    if encoding == "identity":
        return body
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run a receiver in the foreground: each span as one JSON line on stdout, the
    banner (where it listens) on stderr."""
    parser = argparse.ArgumentParser(prog="python -m switchboard.otlp_receiver")
    parser.add_argument("--host", default="127.0.0.1", help="a loopback or link-local address")
    parser.add_argument("--port", type=int, default=4318, help="0 picks a free port")
    args = parser.parse_args(argv)

    def show(spans: list[ReceivedSpan]) -> None:
        for span in spans:
            print(json.dumps(asdict(span), default=str), flush=True)

    # Before the banner: whoever reads it may signal at once.
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    receiver = OtlpReceiver(host=args.host, port=args.port, on_spans=show)
    with receiver:
        # stdout carries only JSON lines, so a pipe into jq or json.loads reads every line.
        print(
            f"OTLP/HTTP receiver at {receiver.endpoint}{TRACES_PATH}", file=sys.stderr, flush=True
        )
        # Polled, not one long wait: the handler then never has to interrupt a blocked
        # lock acquire (one CI run saw a SIGINT'd receiver go on for 10 s).
        while not stopping.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
