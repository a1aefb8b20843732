"""Tests for the C fast path's header check: it accepts only headers the Python decoder
accepts (a subset of them), and fastpath.load's switch that turns it off.

Without the extension these tests skip locally and fail under ``CI=true`` (the
``extension`` and ``fast`` fixtures of the router_core conftest).
"""

from __future__ import annotations

from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router_core import fastpath
from router_core.wire import DATA_KINDS, Header, Kind, WireError, decode_header, encode_header

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

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
