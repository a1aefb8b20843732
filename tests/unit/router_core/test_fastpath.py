"""Tests for the C fast path of the forward hop: its header check and its forwarding loop.

The C check must accept only headers the Python decoder accepts (it is a subset), and
the loop must forward canonical messages untouched and hand every other message back
whole. Without the extension these tests skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from types import ModuleType

import msgspec
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router_core import fastpath
from router_core.transport import MAX_FRAMES, bind, connect
from router_core.wire import DATA_KINDS, Header, Kind, WireError, decode_header, encode_header
from tests.support.eventually import wait_until
from tests.support.zmq_context import bounded_context

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WAIT_MS = 2000

DATA_KIND_LIST = sorted(DATA_KINDS)

ASCII = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=40)
#: Lengths at the msgpack fixstr/str8/str16 boundaries.
BOUNDARY_ASCII = st.sampled_from([0, 31, 32, 255, 256, 65535]).map(lambda n: "a" * n)
ASCII_TEXT = st.one_of(ASCII, BOUNDARY_ASCII)
#: Every integer width msgpack has, with the boundaries between them.
SENT_NS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.sampled_from(
        [
            *(0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1),
            *(-1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)),
        ]
    ),
)


def running_in_ci() -> bool:
    """Whether this run is CI's (``CI=true``)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Skip locally; fail under CI, where a missing extension is a broken build."""
    if running_in_ci():
        pytest.fail(f"CI=true: the C fast path must be tested: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def extension() -> ModuleType:
    """The compiled ``router_core._fastpath`` module."""
    try:
        from router_core import _fastpath  # type: ignore[attr-defined]
    except ImportError as exc:
        unavailable(f"router_core._fastpath is not built ({exc}); run pip install -e .")
    return _fastpath  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def fast(extension: ModuleType) -> fastpath.FastForwarder:
    """The forwarder for the data kinds, wired to pyzmq's libzmq."""
    with pytest.MonkeyPatch.context() as patch:
        # Test the extension even where the environment turns it off; forget any cached
        # decision so load() really looks.
        patch.delenv("SWITCHBOARD_NO_FASTPATH", raising=False)
        patch.setattr(fastpath, "_native_checked", False, raising=False)
        patch.setattr(fastpath, "_native", None, raising=False)
        forwarder = fastpath.load(DATA_KINDS)
    if forwarder is None:
        unavailable("fastpath.load() returned None (libzmq not found in this process)")
    assert forwarder is not None
    return forwarder


def canonical(kind: Kind, rid: str = "r", reply_to: str = "ipc:///w", sent_ns: int = 0) -> bytes:
    """A canonical single-request header."""
    return encode_header(Header(kind, [rid], [reply_to], sent_ns, "tp", "ts"))


@st.composite
def canonical_headers(draw: st.DrawFn, kinds: list[Kind]) -> Header:
    """A single-request header of one of ``kinds`` with ASCII strings."""
    return Header(
        draw(st.sampled_from(kinds)),
        [draw(ASCII_TEXT)],
        [draw(ASCII_TEXT)],
        draw(SENT_NS),
        draw(ASCII_TEXT),
        draw(ASCII_TEXT),
    )


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A canonical header after a few byte edits, insertions, deletions and a truncation."""
    header = draw(canonical_headers(DATA_KIND_LIST))
    data = bytearray(encode_header(header)[:400])
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["set", "insert", "delete"]))
        at = draw(st.integers(0, len(data)))
        value = draw(st.integers(0, 255))
        if op == "set" and at < len(data):
            data[at] = value
        elif op == "insert":
            data.insert(at, value)
        elif op == "delete" and at < len(data):
            del data[at]
    cut = draw(st.integers(0, len(data)))
    return bytes(data[: cut if draw(st.booleans()) else len(data)])


#: For each slot of a header: canonical pieces, then pieces that break it (or that the C
#: check does not take). Assembling them gives headers that are valid or a near miss.
GOOD_STRINGS = [b"\xa0", b"\xa1a", b"\xa3abc", b"\xd9\x01a", b"\xd9\x00", b"\xda\x00\x01a"]
BAD_STRINGS = [
    b"\xa1\xff",
    b"\xa2\xc3\xa9",
    b"\xdb\x00\x00\x00\x01a",
    b"\xc4\x01a",
    b"\xd9\x05ab",
    b"\xa5ab",
    b"\xc0",
    b"\x00",
    b"\xda\x00",
]
GOOD_INTS = [
    b"\x00",
    b"\x7f",
    b"\xe0",
    b"\xcc\x05",
    b"\xcd\x00\x05",
    b"\xce" + bytes(4),
    b"\xcf" + bytes(8),
    b"\xd0\x80",
    b"\xd1\x80\x00",
    b"\xd2" + bytes(4),
    b"\xd3" + bytes(8),
]
BAD_INTS = [b"\xcf" + bytes(7), b"\xc0", b"\xca" + bytes(4), b"\xcb" + bytes(8), b"\xa0", b"\xc3"]
ONE = ([b"\x91"], [b"\x90", b"\x92", b"\xdc\x00\x01", b"\xc0"])
STRING = (GOOD_STRINGS, BAD_STRINGS)
SLOTS = [
    ([b"\x96"], [b"\x95", b"\x97", b"\x94", b"\xdc\x00\x06", b"\x86"]),
    ([b"\x01", b"\x02", b"\x03"], [b"\x0c", b"\x28", b"\x7f", b"\x00", b"\xcc\x01", b"\xff"]),
    ONE,
    STRING,
    ONE,
    STRING,
    (GOOD_INTS, BAD_INTS),
    STRING,
    STRING,
    ([b""], [b"\x00", b"\xc0", b"\xa0"]),
]  # fmt: skip


@st.composite
def assembled(draw: st.DrawFn) -> bytes:
    """A header built slot by slot: mostly canonical pieces, with about one deviation."""
    pieces = []
    for good, bad in SLOTS:
        roll = draw(st.integers(0, 19))
        if roll == 0:
            continue  # leave the slot out
        pieces.append(draw(st.sampled_from(bad if roll == 1 else good)))
    return b"".join(pieces)


def assert_python_agrees(header: bytes, kind: int) -> None:
    """If the C check accepted ``header``, the Python decoder accepts it the same way."""
    if kind == -1:
        return
    decoded = decode_header(header)
    assert decoded.kind == kind
    assert len(decoded.rids) == 1
    assert len(decoded.reply_to) == 1


class TestHeaderKind:
    """FastForwarder.header_kind: the C check is a subset of the Python decoder."""

    @SETTINGS
    @given(header=canonical_headers(DATA_KIND_LIST))
    def test_canonical_data_headers_are_recognised(
        self, fast: fastpath.FastForwarder, header: Header
    ) -> None:
        """Any encode_header output with a data kind, one rid, one reply_to of at most 255
        bytes (the longest address the loop counts traffic by), ASCII, is read; a longer
        reply_to goes to Python."""
        frame = encode_header(header)
        expected = header.kind if len(header.reply_to[0]) <= 255 else -1
        assert fast.header_kind(frame) == expected
        assert decode_header(frame) == header

    @SETTINGS
    @given(data=st.one_of(st.binary(max_size=80), assembled(), mutated()))
    def test_never_accepts_what_python_rejects(
        self, fast: fastpath.FastForwarder, data: bytes
    ) -> None:
        """For arbitrary, assembled and mutated bytes, acceptance implies Python accepts."""
        assert_python_agrees(data, fast.header_kind(data))

    @SETTINGS
    @given(
        header=canonical_headers(DATA_KIND_LIST),
        field=st.sampled_from(["rid", "reply_to", "traceparent", "tracestate"]),
        text=st.tuples(
            st.text(max_size=5), st.characters(min_codepoint=128, exclude_categories=["Cs"])
        ).map("".join),
        at=st.integers(0, 10),
    )
    def test_non_ascii_strings_are_handed_back(
        self, fast: fastpath.FastForwarder, header: Header, field: str, text: str, at: int
    ) -> None:
        """A non-ASCII character in any string makes the C check refuse (-1)."""
        values = {
            "rid": header.rids[0],
            "reply_to": header.reply_to[0],
            "traceparent": header.traceparent,
            "tracestate": header.tracestate,
        }
        values[field] = values[field][:at] + text + values[field][at:]
        changed = Header(
            header.kind,
            [values["rid"]],
            [values["reply_to"]],
            header.sent_ns,
            values["traceparent"],
            values["tracestate"],
        )
        frame = encode_header(changed)
        assert decode_header(frame) == changed
        assert fast.header_kind(frame) == -1

    @pytest.mark.parametrize(
        "header",
        [
            pytest.param(Header(Kind.HEARTBEAT, ["r"], ["w"]), id="non-data-kind"),
            pytest.param(Header(Kind.GENERATE, ["a", "b"], ["w", "w"]), id="two-rids"),
            pytest.param(Header(Kind.ABORT, [], ["w"]), id="abort-without-rid"),
            pytest.param(Header(Kind.GENERATE, ["r"], []), id="no-reply-to"),
            pytest.param(Header(Kind.GENERATE, ["r" * 65536], ["w"]), id="str32-rid"),
        ],
    )
    def test_refuses_non_canonical_headers(
        self, fast: fastpath.FastForwarder, header: Header
    ) -> None:
        """Headers outside the canonical subset are handed back, even ones Python accepts."""
        assert fast.header_kind(encode_header(header)) == -1

    def test_kinds_are_sorted_codes(self, fast: fastpath.FastForwarder) -> None:
        """The forwarder's kinds are the data kind codes, sorted (the order of counts)."""
        assert list(fast.kinds) == [int(kind) for kind in DATA_KIND_LIST]

    def test_python_rejects_what_c_refuses_for_garbage(self, fast: fastpath.FastForwarder) -> None:
        """Sanity: an empty frame is refused by both."""
        assert fast.header_kind(b"") == -1
        with pytest.raises(WireError):
            decode_header(b"")


class TestLoad:
    """fastpath.load: the switch that turns the fast path off."""

    def test_disabled_by_environment(
        self, extension: ModuleType, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """SWITCHBOARD_NO_FASTPATH makes load() return None."""
        monkeypatch.setenv("SWITCHBOARD_NO_FASTPATH", "1")
        monkeypatch.setattr(fastpath, "_native_checked", False, raising=False)
        monkeypatch.setattr(fastpath, "_native", None, raising=False)
        assert fastpath.load(DATA_KINDS) is None


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
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    """This test's own bounded context: a socket left open on it fails the test, named."""
    with bounded_context() as ctx:
        yield ctx


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
