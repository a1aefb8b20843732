"""Tests for the C fast path's forwarding loop: canonical messages go through untouched
and counted, every other message is handed back whole, and the traffic, bytes and hop
latency it reports.

Without the extension these tests skip locally and fail under ``CI=true`` (the ``fast``
fixture of the router_core conftest).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import msgspec
import pytest
import zmq

from router_core import fastpath
from router_core.transport import MAX_FRAMES, bind, connect
from router_core.wire import Header, Kind, WireError, decode_header, encode_header
from tests.support.eventually import wait_until

WAIT_MS = 2000


def canonical(kind: Kind, rid: str = "r", reply_to: str = "ipc:///w", sent_ns: int = 0) -> bytes:
    """A canonical single-request header."""
    return encode_header(Header(kind, [rid], [reply_to], sent_ns, "tp", "ts"))


class Hop:
    """A feeder PUSH -> src PULL, and a dst PUSH -> sink PULL, all on inproc."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], hwm: int) -> None:
        self.src = bind(context, zmq.PULL, "inproc://src")
        self.feeder = connect(context, zmq.PUSH, "inproc://src")
        self.sink = bind(context, zmq.PULL, "inproc://sink", hwm=hwm)
        self.dst = connect(context, zmq.PUSH, "inproc://sink", hwm=hwm)

    def feed(self, *messages: list[bytes]) -> None:
        for frames in messages:
            self.feeder.send_multipart(frames)
        if not self.src.poll(WAIT_MS, zmq.POLLIN):
            pytest.fail("nothing reached the source socket")

    def received(self, count: int) -> list[list[bytes]]:
        out = []
        for _ in range(count):
            if not self.sink.poll(WAIT_MS, zmq.POLLIN):
                pytest.fail(f"only {len(out)} of {count} messages reached the sink")
            out.append(self.sink.recv_multipart())
        return out

    def close(self) -> None:
        for sock in (self.feeder, self.src, self.dst, self.sink):
            sock.close(linger=0)


@pytest.fixture
def hop(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Hop]:
    """A hop with room for everything the tests send."""
    sockets = Hop(context, hwm=10_000)
    yield sockets
    sockets.close()


@pytest.fixture
def narrow_hop(context: zmq.Context[zmq.Socket[bytes]]) -> Iterator[Hop]:
    """A hop whose destination holds almost nothing (HWM 1 on both sides)."""
    sockets = Hop(context, hwm=1)
    yield sockets
    sockets.close()


def request(kind: Kind, index: int) -> list[bytes]:
    """A canonical two-frame request numbered ``index``."""
    return [canonical(kind, rid=f"r{index}", sent_ns=index), f"payload-{index}".encode()]


def forward_until(
    fast: fastpath.FastForwarder, hop: Hop, done: int, budget: int = 1000
) -> tuple[fastpath.ForwardResult, list[int]]:
    """Call forward() until ``done`` messages went (or a non-EMPTY outcome); sum the counts."""
    totals = [0] * len(fast.kinds)

    def forwarded() -> fastpath.ForwardResult | None:
        result = fast.forward(hop.src, hop.dst, budget, linger_ms=10)
        totals[:] = [a + b for a, b in zip(totals, result.counts, strict=True)]
        return result if result.status != fastpath.EMPTY or sum(totals) >= done else None

    def progress() -> str:
        return f"{done} messages forwarded ({sum(totals)} so far)"

    return wait_until(forwarded, WAIT_MS / 1000, progress, interval=0.001), totals


class TestForward:
    """FastForwarder.forward on real sockets."""

    def test_forwards_canonical_messages_with_counts(
        self, fast: fastpath.FastForwarder, hop: Hop
    ) -> None:
        """Canonical requests go through byte for byte, in order, counted per kind."""
        kinds = [Kind.GENERATE] * 3 + [Kind.EMBED] * 2 + [Kind.ABORT]
        messages = [request(kind, i) for i, kind in enumerate(kinds)]
        hop.feed(*messages)
        result, totals = forward_until(fast, hop, len(messages))
        assert totals == [3, 2, 1]
        assert result.frames is None
        assert hop.received(len(messages)) == messages
        assert fast.forward(hop.src, hop.dst, 10, linger_ms=0).status == fastpath.EMPTY

    def test_budget_stops_early(self, fast: fastpath.FastForwarder, hop: Hop) -> None:
        """With more waiting than the budget, forward() moves the budget and says BUDGET."""
        hop.feed(*(request(Kind.GENERATE, i) for i in range(5)))
        result = fast.forward(hop.src, hop.dst, 2, linger_ms=0)
        assert result.status == fastpath.BUDGET
        assert result.counts == [2, 0, 0]
        _, totals = forward_until(fast, hop, 3)
        assert totals == [3, 0, 0]
        assert hop.received(5) == [request(Kind.GENERATE, i) for i in range(5)]

    @pytest.mark.parametrize(
        "odd",
        [
            pytest.param([b"garbage", b"payload"], id="bad-header"),
            pytest.param([canonical(Kind.HEARTBEAT), b"payload"], id="non-data-kind"),
            pytest.param([canonical(Kind.GENERATE, rid="é"), b"payload"], id="non-ascii"),
            pytest.param([canonical(Kind.GENERATE)], id="one-frame"),
            pytest.param([canonical(Kind.GENERATE), b"p1", b"p2"], id="three-frames"),
            pytest.param([b"garbage", b"p1", b"p2", b"p3"], id="bad-header-four-frames"),
        ],
    )
    def test_hands_back_other_messages_whole(
        self, fast: fastpath.FastForwarder, hop: Hop, odd: list[bytes]
    ) -> None:
        """A message the C check will not forward comes back as HANDOFF with all its frames."""
        before, after = request(Kind.GENERATE, 0), request(Kind.EMBED, 1)
        hop.feed(before, odd, after)
        result, totals = forward_until(fast, hop, 1)
        assert result.status == fastpath.HANDOFF
        assert result.frames == odd
        assert totals == [1, 0, 0]
        _, totals = forward_until(fast, hop, 1)
        assert totals == [0, 1, 0]
        assert hop.received(2) == [before, after]

    def test_oversized_message_is_handed_back_over_the_limit(
        self, fast: fastpath.FastForwarder, hop: Hop
    ) -> None:
        """A message past MAX_FRAMES comes back with MAX_FRAMES+1 frames, rest consumed."""
        huge = [canonical(Kind.GENERATE), *(b"x" for _ in range(MAX_FRAMES + 20))]
        after = request(Kind.GENERATE, 1)
        hop.feed(huge, after)
        result, _ = forward_until(fast, hop, 0)
        assert result.status == fastpath.HANDOFF
        assert result.frames is not None
        assert len(result.frames) == MAX_FRAMES + 1
        assert result.frames[0] == huge[0]
        _, totals = forward_until(fast, hop, 1)
        assert totals == [1, 0, 0]
        assert hop.received(1) == [after]

    def test_max_frames_message_is_handed_back_whole(
        self, fast: fastpath.FastForwarder, hop: Hop
    ) -> None:
        """A message of exactly MAX_FRAMES frames comes back with every frame."""
        big = [canonical(Kind.GENERATE), *(str(i).encode() for i in range(MAX_FRAMES - 1))]
        hop.feed(big)
        result, _ = forward_until(fast, hop, 0)
        assert result.status == fastpath.HANDOFF
        assert result.frames == big

    def test_full_destination_returns_blocked(
        self, fast: fastpath.FastForwarder, narrow_hop: Hop
    ) -> None:
        """When the destination refuses, the message comes back BLOCKED; nothing is lost."""
        total = 30
        messages = [request(Kind.GENERATE, i) for i in range(total)]
        narrow_hop.feed(*messages)
        result, totals = forward_until(fast, narrow_hop, total)
        assert result.status == fastpath.BLOCKED
        forwarded = sum(totals)
        assert 0 < forwarded < total
        assert result.frames == messages[forwarded]
        assert narrow_hop.received(forwarded) == messages[:forwarded]
        rest = []
        while narrow_hop.src.poll(0, zmq.POLLIN):
            rest.append(narrow_hop.src.recv_multipart())
        assert rest == messages[forwarded + 1 :]


def traced_request(index: int, owner: str, traceparent: str = "", sent_ns: int = 0) -> list[bytes]:
    """A two-frame request owned by ``owner``, optionally carrying a trace context."""
    header = Header(Kind.GENERATE, [f"r{index}"], [owner], sent_ns, traceparent, "")
    return [encode_header(header), b"x" * 10]


class TestAccounting:
    """What forward() reports besides the per-kind counts: owners, bytes, hop latency."""

    BOUNDS_NS = (1_000_000, 1_000_000_000)  # 1 ms, 1 s

    def test_traffic_is_summed_per_owner(self, fast: fastpath.FastForwarder, hop: Hop) -> None:
        """Messages and bytes are reported once per owning worker address."""
        messages = [traced_request(i, f"ipc:///w{i % 2}") for i in range(5)]
        hop.feed(*messages)
        result = fast.forward(hop.src, hop.dst, 100, linger_ms=50, bounds_ns=self.BOUNDS_NS)
        hop.received(5)
        size = len(messages[0][0]) + len(messages[0][1])
        assert sorted(result.sources) == [(b"ipc:///w0", 3, 3 * size), (b"ipc:///w1", 2, 2 * size)]

    def test_many_owners_are_counted_exactly(self, fast: fastpath.FastForwarder, hop: Hop) -> None:
        """More owners than one call's table holds, with long addresses: every owner's
        count is exact and every address comes back byte for byte (the table copies
        addresses before a send hands the frame's memory to libzmq)."""
        owners = [f"ipc:///tmp/{'x' * 200}/worker-{i}" for i in range(40)]
        messages = [traced_request(i, owners[i % 40]) for i in range(2000)]
        totals: dict[bytes, int] = {}
        for start in range(0, len(messages), 500):
            hop.feed(*messages[start : start + 500])
            moved = 0
            while moved < 500:
                result = fast.forward(hop.src, hop.dst, 500, linger_ms=50)
                for address, count, _ in result.sources:
                    totals[address] = totals.get(address, 0) + count
                moved += sum(result.counts)
                assert result.frames is None
            hop.received(500)
        assert totals == {owner.encode(): 50 for owner in owners}

    def test_latency_lands_in_its_bucket(self, fast: fastpath.FastForwarder, hop: Hop) -> None:
        """A message sent 10 ms ago counts in the (1 ms, 1 s] bucket; an unstamped one not."""
        ten_ms_ago = time.time_ns() - 10_000_000
        hop.feed(traced_request(0, "ipc:///w", sent_ns=ten_ms_ago), traced_request(1, "ipc:///w"))
        result = fast.forward(hop.src, hop.dst, 100, linger_ms=50, bounds_ns=self.BOUNDS_NS)
        hop.received(2)
        assert result.latency_counts == [0, 1, 0]
        assert 0.01 <= result.latency_sum_s < 1.0

    def test_traced_requests_are_handed_back_when_asked(
        self, fast: fastpath.FastForwarder, hop: Hop
    ) -> None:
        """With untraced_only, a request carrying a traceparent goes to Python whole."""
        traced = traced_request(
            1, "ipc:///w", traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01"
        )
        hop.feed(traced_request(0, "ipc:///w"), traced)
        result = fast.forward(hop.src, hop.dst, 100, linger_ms=50, untraced_only=True)
        assert result.status == fastpath.HANDOFF
        assert result.frames == traced
        assert result.counts == [1, 0, 0]
        assert fast.header_kind(traced[0], untraced_only=True) == -1
        assert fast.header_kind(traced[0]) == Kind.GENERATE

    def test_six_element_headers_still_forward(self, fast: fastpath.FastForwarder) -> None:
        """A header from a producer that predates row_traces (6 elements) is canonical."""
        six = msgspec.msgpack.encode([int(Kind.GENERATE), ["r"], ["ipc:///w"], 0, "", ""])
        assert six[0] == 0x96
        assert fast.header_kind(six) == Kind.GENERATE
        assert decode_header(six).row_traces == []

    def test_rows_traces_on_a_request_are_not_canonical(self, fast: fastpath.FastForwarder) -> None:
        """A 7-element request header whose row_traces is not empty is handed back."""
        odd = msgspec.msgpack.encode([int(Kind.GENERATE), ["r"], ["ipc:///w"], 0, "", "", ["x"]])
        assert fast.header_kind(odd) == -1
        with pytest.raises(WireError):
            decode_header(odd)
