"""Finish reasons: the wire maps Switchboard writes, and the typed view readers use."""

from __future__ import annotations

import msgspec
import pytest

from router_core.wire.finish import FinishReason, abort_reason, length_reason, stop_reason
from router_core.wire.outputs import BatchStrOutput


class TestMaps:
    """The builders write SGLang's finished_reason shapes, and they travel in rows."""

    def test_shapes(self) -> None:
        """length, stop (matched kept even when None) and abort, exactly."""
        assert length_reason(16) == {"type": "length", "length": 16}
        assert stop_reason(None) == {"type": "stop", "matched": None}
        assert stop_reason("END") == {"type": "stop", "matched": "END"}
        assert abort_reason("gone") == {"type": "abort", "message": "gone"}

    def test_a_row_carries_the_map_untouched(self) -> None:
        """A reason with an engine's own key survives a row's encode and decode."""
        reason = {**stop_reason(7), "engine_note": [1, 2]}
        row = BatchStrOutput(rids=["r"], output_strs=[""], finished_reasons=[reason])
        decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(row), type=BatchStrOutput)
        assert decoded.finished_reasons == [reason]


class TestView:
    """FinishReason.of reads a map by type, leniently."""

    @pytest.mark.parametrize(
        ("reason", "token", "string"),
        [
            (stop_reason(7), 7, None),
            (stop_reason("END"), None, "END"),
            (stop_reason(""), None, None),
            (stop_reason(None), None, None),
            (stop_reason(True), None, None),
            (length_reason(3), None, None),
        ],
    )
    def test_stop_token_and_string(
        self, reason: dict[str, object], token: int | None, string: str | None
    ) -> None:
        """Only a stop names a token (an int, not a bool) or a string (non-empty)."""
        view = FinishReason.of(reason)
        assert (view.stop_token, view.stop_string) == (token, string)

    def test_fields_of_each_type(self) -> None:
        """Each type's own field is read; the others are None."""
        assert FinishReason.of(length_reason(5)) == FinishReason(type="length", length=5)
        assert FinishReason.of(abort_reason("x")) == FinishReason(type="abort", message="x")

    def test_a_foreign_map_reads_leniently(self) -> None:
        """No string type: type is None; fields of the wrong type read as absent; an
        empty type stays what it is."""
        view = FinishReason.of({"type": 3, "length": "long", "message": 9, "matched": [1]})
        assert view == FinishReason(type=None)
        assert FinishReason.of({"type": ""}).type == ""
