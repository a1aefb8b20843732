"""Tests for the engine link's lifecycle and its poll: real ZeroMQ sockets, the router side
played by test sockets."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import msgspec
import pytest
import zmq

import router_core
from router_core.endpoints import EndpointError
from router_core.engine_link import Command, EngineEndpoints, EngineLink, Request
from router_core.wire import Header, Kind, encode_header, encode_payload, frame_message
from router_core.wire.control import ContinueRequest, FreezeGC, LoadSnapshot, PauseRequest
from router_core.wire.requests import AbortRequest, EmbeddingRequest, GenerateRequest
from tests.unit.router_core.engine_link.router_side import (
    OWNER,
    TRACEPARENT,
    WAIT_MS,
    RouterSide,
    Sides,
    generate,
    inproc_endpoints,
    poll_until,
)


class TestLifecycle:
    """open/close, the context manager, and no work in __init__."""

    def test_init_opens_nothing(self, run_dir: Path) -> None:
        """A new link has no sockets: no socket file, and every call asks for open()."""
        link = EngineLink(EngineEndpoints.in_run_dir(run_dir))
        assert not link.is_open and not (run_dir / "engine").exists()
        for call in (link.poll, link.send_idle, link.backlogs, lambda: link.acknowledge("x")):
            with pytest.raises(RuntimeError, match="not open"):
                call()

    def test_with_binds_and_close_removes_the_socket_file(self, run_dir: Path) -> None:
        """``with`` binds the inbound ipc file; leaving it removes the file; close is idempotent."""
        link = EngineLink(EngineEndpoints.in_run_dir(run_dir))
        with link as opened:
            assert opened is link and link.is_open
            assert (run_dir / "engine").is_socket()
        assert not link.is_open and not (run_dir / "engine").exists()
        link.close()
        link.open()
        assert (run_dir / "engine").is_socket()
        link.close(0.0)

    def test_open_twice_refused(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        """A second open() of an open link raises."""
        link = EngineLink(inproc_endpoints(), context=context).open()
        try:
            with pytest.raises(RuntimeError, match="already open"):
                link.open()
        finally:
            link.close(0.0)

    def test_given_context_is_left_running(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        """A context passed in is not terminated by close()."""
        link = EngineLink(inproc_endpoints(), context=context).open()
        link.close(0.0)
        assert not context.closed

    def test_remote_endpoint_refused_and_nothing_left_open(self, run_dir: Path) -> None:
        """A non-loopback tcp endpoint fails open() before any socket exists."""
        endpoints = msgspec.structs.replace(
            EngineEndpoints.in_run_dir(run_dir), events="tcp://192.0.2.1:5555"
        )
        link = EngineLink(endpoints)
        with pytest.raises(EndpointError):
            link.open()
        assert not link.is_open and not (run_dir / "engine").exists()

    def test_second_engine_on_the_same_path_refused(self, run_dir: Path) -> None:
        """Opening a link whose inbound a running link holds fails with EADDRINUSE."""
        endpoints = EngineEndpoints.in_run_dir(run_dir)
        with EngineLink(endpoints) as first:
            with pytest.raises(zmq.ZMQError) as caught:
                EngineLink(endpoints).open()
            assert caught.value.errno == errno.EADDRINUSE
            assert first.is_open and (run_dir / "engine").is_socket()

    @pytest.mark.parametrize("setting", ["hwm", "backlog_limit", "budget"])
    def test_unbounded_settings_refused(self, setting: str) -> None:
        """hwm, backlog_limit and budget must be positive."""
        with pytest.raises(ValueError, match="positive"):
            EngineLink(inproc_endpoints(), **{setting: 0})  # type: ignore[arg-type]

    def test_exported_from_router_core(self) -> None:
        """The link's public names are importable from router_core itself."""
        assert router_core.EngineLink is EngineLink
        assert router_core.EngineEndpoints is EngineEndpoints
        assert {"EngineLink", "EngineEndpoints", "Request", "Command"} <= set(router_core.__all__)


class TestPoll:
    """poll(): typed inputs in arrival order, bounded, bad messages counted never raised."""

    def test_typed_inputs_in_arrival_order(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """Requests and commands come back as Request/Command, interleaved as sent."""
        link, side = pair
        side.send(
            generate("r1", traceparent=TRACEPARENT, tracestate="k=v"),
            frame_message(Kind.PAUSE, PauseRequest("op-1", "retract")),
            frame_message(
                Kind.EMBED, EmbeddingRequest(rid="e1", input_ids=[4]), rids=["e1"], reply_to=[OWNER]
            ),
            frame_message(Kind.ABORT, AbortRequest(abort_all=True), reply_to=[OWNER]),
            frame_message(Kind.ABORT, AbortRequest(rid="r1"), rids=["r1"], reply_to=[OWNER]),
            frame_message(Kind.CONTINUE, ContinueRequest("op-2")),
            frame_message(Kind.FREEZE_GC, FreezeGC(reason="control")),
        )
        items = poll_until(link, 7)
        assert [item.kind for item in items] == [
            Kind.GENERATE,
            Kind.PAUSE,
            Kind.EMBED,
            Kind.ABORT,
            Kind.ABORT,
            Kind.CONTINUE,
            Kind.FREEZE_GC,
        ]
        first = items[0]
        assert isinstance(first, Request) and isinstance(first.payload, GenerateRequest)
        assert (first.rid, first.reply_to) == ("r1", OWNER)
        assert (first.traceparent, first.tracestate) == (TRACEPARENT, "k=v")
        assert abs(first.sent_ns - time.time_ns()) < 60 * 10**9
        assert first.payload.input_ids == [1, 2, 3]
        pause = items[1]
        assert isinstance(pause, Command) and pause.payload == PauseRequest("op-1", "retract")
        abort_all = items[3]
        assert isinstance(abort_all, Request) and abort_all.rid == ""
        assert abort_all.payload == AbortRequest(abort_all=True)
        assert isinstance(items[4], Request) and items[4].rid == "r1"
        assert link.counters.snapshot()["received"] == {
            "generate": 1,
            "pause": 1,
            "embed": 1,
            "abort": 2,
            "continue": 1,
            "freeze_gc": 1,
        }

    def test_empty_poll_returns_nothing_after_the_timeout(
        self, pair: tuple[EngineLink, RouterSide]
    ) -> None:
        """poll(0) returns at once; poll(60) waits about 60 ms when nothing comes."""
        link, _ = pair
        assert link.poll(0) == []
        started = time.monotonic()
        assert link.poll(60) == []
        assert 0.05 <= time.monotonic() - started < 1.0
        with pytest.raises(ValueError, match="negative"):
            link.poll(-1)

    def test_input_arriving_during_the_wait_ends_it(
        self, pair: tuple[EngineLink, RouterSide]
    ) -> None:
        """A message sent while poll waits is returned well before the timeout."""
        link, side = pair
        sender = threading.Timer(0.05, lambda: side.send(generate("late")))
        sender.start()
        started = time.monotonic()
        try:
            items = link.poll(5000)
        finally:
            sender.join()
        assert [item.rid for item in items if isinstance(item, Request)] == ["late"]
        assert time.monotonic() - started < 4.0

    def test_budget_bounds_one_poll(
        self, context: zmq.Context[zmq.Socket[bytes]], sides: Sides
    ) -> None:
        """With budget 3, seven waiting messages come back as 3, 3 and 1, in order."""
        endpoints = inproc_endpoints()
        link = EngineLink(endpoints, context=context, budget=3).open()
        try:
            side = sides.make(endpoints)
            side.send(*(generate(f"r{i}") for i in range(7)))
            batches: list[list[str]] = []
            while sum(map(len, batches)) < 7:
                items = link.poll(WAIT_MS)
                assert items
                batches.append([item.rid for item in items if isinstance(item, Request)])
            assert [len(b) for b in batches] == [3, 3, 1]
            assert [rid for b in batches for rid in b] == [f"r{i}" for i in range(7)]
        finally:
            link.close(0.0)

    def test_bad_messages_counted_and_skipped(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """Every malformed message is counted under rejected by reason; good ones still come."""
        link, side = pair
        good = generate("ok")
        mismatched = frame_message(
            Kind.GENERATE,
            GenerateRequest(rid="other", input_ids=[1]),
            rids=["r"],
            reply_to=[OWNER],
        )
        side.send(
            [b"\xc1not a header", b"x"],
            [good[0]],
            [good[0], good[1], b"extra"],
            frame_message(Kind.LOAD, LoadSnapshot()),
            [good[0], b"\xc1"],
            [encode_header(Header(Kind.PAUSE)), encode_payload(LoadSnapshot())],
            mismatched,
            [encode_header(Header(Kind.IDLE, ["r"], [OWNER]))],
            [good[0]] + [b"x"] * 4100,
            good,
        )
        items = poll_until(link, 1)
        assert [item.rid for item in items if isinstance(item, Request)] == ["ok"]
        assert link.counters.snapshot()["rejected"] == {
            "bad_header": 1,
            "frame_count": 2,
            "unexpected_kind": 1,
            "bad_payload": 2,
            "rid_mismatch": 1,
            "header_shape": 1,
            "too_many_frames": 1,
        }
