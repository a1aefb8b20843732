"""Tests for the engine link: real ZeroMQ sockets, the router side played by test sockets."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import msgspec
import pytest
import zmq

import router_core
from router_core.endpoints import (
    DetokenizerRouterEndpoints,
    EndpointError,
    RouterEndpoints,
)
from router_core.engine_link import (
    MAX_BATCH_ROWS,
    Command,
    EngineEndpoints,
    EngineLink,
    Request,
)
from router_core.wire import (
    Header,
    Kind,
    WireError,
    combine_rows,
    decode_header,
    decode_message,
    encode_header,
    encode_payload,
    frame_message,
)
from router_core.wire.control import (
    ContinueRequest,
    FreezeGC,
    LoadSnapshot,
    PauseRequest,
)
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput
from router_core.wire.requests import AbortRequest, EmbeddingRequest, GenerateRequest
from tests.support.eventually import wait_until

REPO = Path(__file__).resolve().parents[4]
#: How long a receive may wait before the test fails instead of hanging.
WAIT_MS = 2000
OWNER = "ipc:///tmp/sb-unit/worker-w0"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
_names = count()


def inproc_endpoints() -> EngineEndpoints:
    """Fresh inproc endpoints (no files, one context)."""
    n = next(_names)
    return EngineEndpoints(
        inbound=f"inproc://engine-{n}", events=f"inproc://events-{n}", outputs=f"inproc://out-{n}"
    )


class RouterSide:
    """The sockets a router and a detokenizer router would hold, owned by the test."""

    def __init__(
        self, context: zmq.Context[zmq.Socket[bytes]], endpoints: EngineEndpoints, hwm: int
    ) -> None:
        self._owned: list[zmq.Socket[bytes]] = []
        self._hwm = hwm
        self.requests = self._socket(context, zmq.PUSH)
        self.requests.connect(endpoints.inbound)
        self.events = self._socket(context, zmq.PULL)
        self.events.bind(endpoints.events)
        self.outputs = self._socket(context, zmq.PULL)
        self.outputs.bind(endpoints.outputs)

    def _socket(self, context: zmq.Context[zmq.Socket[bytes]], kind: int) -> zmq.Socket[bytes]:
        sock = context.socket(kind)
        self._owned.append(sock)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, self._hwm)
        return sock

    def close(self) -> None:
        for sock in self._owned:
            sock.close(linger=0)

    def send(self, *messages: list[bytes]) -> None:
        for frames in messages:
            self.requests.send_multipart(frames)

    @staticmethod
    def receive(sock: zmq.Socket[bytes]) -> list[bytes]:
        """One message, or fail after WAIT_MS."""
        if not sock.poll(WAIT_MS, zmq.POLLIN):
            pytest.fail(f"no message within {WAIT_MS} ms")
        return sock.recv_multipart()


class Sides:
    """Router sides made by one test, closed at teardown even if the test fails."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self._context = context
        self._made: list[RouterSide] = []

    def make(self, endpoints: EngineEndpoints, hwm: int = 1000) -> RouterSide:
        side = RouterSide(self._context, endpoints, hwm)
        self._made.append(side)
        return side

    def close(self) -> None:
        for side in self._made:
            side.close()


@pytest.fixture
def sides(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Sides]:
    """This test's router sides."""
    owned = Sides(context)
    yield owned
    owned.close()


@pytest.fixture
def pair(
    context: zmq.Context[zmq.Socket[bytes]], sides: Sides
) -> Iterator[tuple[EngineLink, RouterSide]]:
    """An open link on inproc endpoints and the router side facing it."""
    endpoints = inproc_endpoints()
    link = EngineLink(endpoints, context=context).open()
    yield link, sides.make(endpoints)
    link.close(0.0)


def poll_until(link: EngineLink, wanted: int) -> list[Request | Command]:
    """Poll until ``wanted`` inputs arrived (or fail)."""
    items: list[Request | Command] = []

    def arrived() -> bool:
        items.extend(link.poll(50))
        return len(items) >= wanted

    wait_until(arrived, WAIT_MS / 1000, lambda: f"{wanted} inputs ({items})", interval=0.001)
    assert len(items) == wanted, items
    return items


def generate(rid: str, **header: str) -> list[bytes]:
    request = GenerateRequest(rid=rid, input_ids=[1, 2, 3])
    return frame_message(Kind.GENERATE, request, rids=[rid], reply_to=[OWNER], **header)


def token_batch(rids: list[str]) -> BatchTokenIDOutput:
    return BatchTokenIDOutput(
        rids=rids,
        http_worker_ipcs=[OWNER] * len(rids),
        finished_reasons=[None] * len(rids),
        output_ids=[[7, i] for i in range(len(rids))],
        completion_tokens=[2] * len(rids),
    )


class TestEngineEndpoints:
    """EngineEndpoints: the engine's side of the routers' run-directory layout."""

    def test_default_points_at_the_detokenizer_router(self) -> None:
        """inbound/events are the router's engine/engine_events; outputs the detok inbound."""
        ep = EngineEndpoints.in_run_dir("/run/sb")
        router = RouterEndpoints.in_run_dir("/run/sb")
        assert ep.inbound == router.engine == "ipc:///run/sb/engine"
        assert ep.events == router.engine_events
        assert ep.outputs == DetokenizerRouterEndpoints.in_run_dir("/run/sb", 2).inbound

    def test_outputs_via_router(self) -> None:
        """outputs_via='router' sends outputs to the tokenizer router's outputs."""
        ep = EngineEndpoints.in_run_dir(Path("/run/sb"), outputs_via="router")
        assert ep.outputs == RouterEndpoints.in_run_dir("/run/sb").outputs

    def test_unknown_route_refused(self) -> None:
        """Any other outputs_via is a ValueError."""
        with pytest.raises(ValueError, match="outputs_via"):
            EngineEndpoints.in_run_dir("/run/sb", outputs_via="sideways")  # type: ignore[arg-type]

    def test_frozen(self) -> None:
        """Endpoints cannot be changed after creation."""
        ep = EngineEndpoints.in_run_dir("/run/sb")
        with pytest.raises(AttributeError):
            ep.inbound = "ipc:///elsewhere"  # type: ignore[misc]


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


class TestSends:
    """Outbound messages: batches row per request, idle, freeze-GC, acks and load."""

    def test_batch_framed_row_per_request(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """A token batch arrives as [header, row...] with owners in reply_to; rows recombine."""
        link, side = pair
        batch = token_batch(["a", "b", "c"])
        assert link.send_batch(batch, traceparent=TRACEPARENT)
        header, rows = decode_message(side.receive(side.outputs))
        assert header.kind is Kind.TOKEN_BATCH and header.rids == ["a", "b", "c"]
        assert header.reply_to == [OWNER] * 3 and header.traceparent == TRACEPARENT
        assert combine_rows(BatchTokenIDOutput, rows) == batch  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("batch", "kind"),
        [
            (
                BatchStrOutput(rids=["s"], http_worker_ipcs=[OWNER], output_strs=["hi"]),
                Kind.STR_BATCH,
            ),
            (
                BatchEmbeddingOutput(rids=["e"], http_worker_ipcs=[OWNER], embeddings=[[0.5]]),
                Kind.EMBEDDING_BATCH,
            ),
        ],
    )
    def test_other_batch_types(
        self,
        pair: tuple[EngineLink, RouterSide],
        batch: BatchStrOutput | BatchEmbeddingOutput,
        kind: Kind,
    ) -> None:
        """String and embedding batches go out with their own kinds."""
        link, side = pair
        assert link.send_batch(batch)
        header, rows = decode_message(side.receive(side.outputs))
        assert header.kind is kind and rows == [batch]
        assert link.counters.snapshot()["sent"] == {kind.name.lower(): 1}

    def test_oversized_batch_split_into_messages(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """A batch beyond MAX_BATCH_ROWS rows goes as several messages, rows in order."""
        link, side = pair
        rids = [f"r{i}" for i in range(MAX_BATCH_ROWS + 5)]
        assert link.send_batch(token_batch(rids))
        first, rest = (decode_message(side.receive(side.outputs)) for _ in range(2))
        assert len(first[0].rids) == MAX_BATCH_ROWS and len(rest[0].rids) == 5
        assert first[0].rids + rest[0].rids == rids
        assert [row.rids[0] for row in rest[1]] == rids[-5:]  # type: ignore[attr-defined]

    def test_batch_without_owners_is_a_caller_error(
        self, pair: tuple[EngineLink, RouterSide]
    ) -> None:
        """A batch with no http_worker_ipcs raises WireError; nothing is sent."""
        link, side = pair
        with pytest.raises(WireError):
            link.send_batch(BatchTokenIDOutput(rids=["a"], output_ids=[[1]]))
        assert not side.outputs.poll(0)

    def test_idle_and_freeze_gc_go_to_outputs(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """send_idle sends a bare IDLE header; forward_freeze_gc passes the command on."""
        link, side = pair
        assert link.send_idle()
        assert link.forward_freeze_gc(FreezeGC(reason="control"))
        assert link.forward_freeze_gc()
        idle = side.receive(side.outputs)
        assert len(idle) == 1 and decode_header(idle[0]).kind is Kind.IDLE
        _, (forwarded,) = decode_message(side.receive(side.outputs))
        _, (own,) = decode_message(side.receive(side.outputs))
        assert forwarded == FreezeGC(reason="control") and own == FreezeGC(reason="engine")

    def test_acknowledge_and_load_go_to_events(self, pair: tuple[EngineLink, RouterSide]) -> None:
        """acknowledge names participant 'engine'; publish_load stamps taken_ns only if 0."""
        link, side = pair
        before = time.time_ns()
        assert link.acknowledge("op-7")
        assert link.publish_load(LoadSnapshot(running=2, step=5))
        assert link.publish_load(LoadSnapshot(step=6, taken_ns=123))
        header, (ack,) = decode_message(side.receive(side.events))
        assert header.kind is Kind.ACK and msgspec.to_builtins(ack) == {
            "op_id": "op-7",
            "participant": "engine",
        }
        _, (stamped,) = decode_message(side.receive(side.events))
        _, (given,) = decode_message(side.receive(side.events))
        assert isinstance(stamped, LoadSnapshot) and stamped.running == 2
        assert before <= stamped.taken_ns <= time.time_ns()
        assert isinstance(given, LoadSnapshot)
        assert given == LoadSnapshot(
            step=6, taken_ns=123, engine_started_ns=given.engine_started_ns
        )
        assert stamped.engine_started_ns == given.engine_started_ns <= before
        assert link.counters.snapshot()["sent"] == {"ack": 1, "load": 2}


class TestBackpressure:
    """Sends never block: bounded backlogs flushed by poll, drops and closes counted."""

    def test_sent_before_the_router_is_up_then_flushed_by_poll(
        self, run_dir: Path, sides: Sides
    ) -> None:
        """With no peer, a load waits in the backlog; once the peer binds, poll() delivers it."""
        endpoints = EngineEndpoints.in_run_dir(run_dir)
        with EngineLink(endpoints) as link:
            assert link.publish_load(LoadSnapshot(step=1))
            assert link.backlogs() == {"events": 1, "outputs": 0}
            side = sides.make(msgspec.structs.replace(endpoints, inbound="inproc://x"))
            wait_until(lambda: link.poll(20) == [] and link.backlogs()["events"] == 0, 5.0, "flush")
            _, (load,) = decode_message(side.receive(side.events))
            assert isinstance(load, LoadSnapshot)
            assert load == LoadSnapshot(
                step=1, taken_ns=load.taken_ns, engine_started_ns=load.engine_started_ns
            )
            assert 0 < load.engine_started_ns <= load.taken_ns
            assert "dropped" not in link.counters.snapshot()

    def test_full_backlog_drops_and_counts_keeping_order(
        self, context: zmq.Context[zmq.Socket[bytes]], sides: Sides
    ) -> None:
        """A stalled peer fills HWM and backlog; the next send returns False and is counted;
        once the peer reads, poll() flushes the rest in order with only that one missing."""
        endpoints = inproc_endpoints()
        link = EngineLink(endpoints, context=context, hwm=1, backlog_limit=3).open()
        try:
            side = sides.make(endpoints, hwm=1)
            accepted = 0
            while link.send_batch(token_batch([f"r{accepted}"])):
                accepted += 1
                assert accepted < 100, "the backlog never filled"
            assert link.counters.get("dropped", "backlog_full") == 1
            assert link.backlogs()["outputs"] == 3
            received: list[str] = []

            def drained() -> bool:
                link.poll(0)
                while side.outputs.poll(0):
                    received.extend(decode_header(side.outputs.recv_multipart()[0]).rids)
                return len(received) == accepted

            wait_until(drained, 5.0, "every accepted batch delivered")
            assert received == [f"r{i}" for i in range(accepted)]
            assert link.backlogs()["outputs"] == 0
        finally:
            link.close(0.0)

    def test_close_flushes_what_it_can_and_counts_the_rest(self, run_dir: Path) -> None:
        """close(t) drops what no peer took within t, counted as dropped{closed}, in time."""
        link = EngineLink(EngineEndpoints.in_run_dir(run_dir)).open()
        link.acknowledge("op-1")
        link.send_idle()
        started = time.monotonic()
        link.close(0.2)
        assert time.monotonic() - started < 2.0
        assert link.counters.get("dropped", "closed") == 2


class TestDocExample:
    """docs/engine.md carries examples/echo_engine.py verbatim."""

    def test_doc_includes_the_example_verbatim(self) -> None:
        """The example file, exactly, is a python code block of the doc."""
        source = (REPO / "examples" / "echo_engine.py").read_text(encoding="utf-8")
        doc = (REPO / "docs" / "engine.md").read_text(encoding="utf-8")
        assert f"```python\n{source}```\n" in doc
