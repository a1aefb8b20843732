"""regroup: the message that carries only some rows of a framed batch."""

from __future__ import annotations

import msgspec

from router_core.wire import Header, Kind, decode_header, encode_header
from router_core.wire.regroup import regroup

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def batch(row_traces: list[str]) -> tuple[Header, list[bytes]]:
    """A three-row text batch for owners a, b, a."""
    header = Header(Kind.STR_BATCH, ["r0", "r1", "r2"], ["a", "b", "a"], 5, "", "", row_traces)
    return header, [encode_header(header), b"row0", b"row1", b"row2"]


class TestRegroup:
    """Rows are regrouped under a new header; row frames pass untouched."""

    def test_the_whole_batch_is_reused(self) -> None:
        """All rows: the very same message, no new header."""
        header, frames = batch([])
        assert regroup(header, frames, [0, 1, 2]) is frames

    def test_a_subset_gets_its_own_header(self) -> None:
        """Rows 0 and 2: their rids, owners and the batch's sent_ns; the same frames."""
        header, frames = batch([TRACE, "", ""])
        message = regroup(header, frames, [0, 2])
        sub = decode_header(message[0])
        assert (sub.rids, sub.reply_to, sub.sent_ns) == (["r0", "r2"], ["a", "a"], 5)
        assert sub.row_traces == [TRACE, ""]
        assert message[1] is frames[1] and message[2] is frames[3]

    def test_untraced_rows_carry_no_traces(self) -> None:
        """A subset none of whose rows is traced has no row_traces at all."""
        header, frames = batch([TRACE, "", ""])
        sub = decode_header(regroup(header, frames, [1, 2])[0])
        assert sub.row_traces == []
        assert msgspec.structs.replace(sub, row_traces=[]) == sub
