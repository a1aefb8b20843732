"""The identifier rules for what peers send, and how a string from the wire is logged."""

from __future__ import annotations

import pytest

from router_core.beacon import IncarnationBeacon
from router_core.identifiers import (
    check_worker_id,
    shown,
    valid_address,
    valid_host,
    valid_process_name,
    valid_version,
    valid_worker_id,
)
from router_core.wire import decode_header, decode_payload


class TestWorkerIds:
    @pytest.mark.parametrize("worker_id", ["w0", "0", "a.b_c-D", "w" * 64, "worker-17.rack_3"])
    def test_the_rule_accepts(self, worker_id: str) -> None:
        """Letters, digits, '.', '_', '-' after a letter or digit, up to 64."""
        assert valid_worker_id(worker_id) and check_worker_id(worker_id) == worker_id

    @pytest.mark.parametrize(
        "worker_id",
        ["", "w" * 65, "-w", ".w", "_w", "w 0", "w\n", "w0\n", "wö", "w/0", "w:0", "w\x00"],
    )
    def test_the_rule_refuses(self, worker_id: str) -> None:
        """Anything else, a trailing newline included; the error shows the id escaped."""
        assert not valid_worker_id(worker_id)
        with pytest.raises(ValueError, match="worker id") as raised:
            check_worker_id(worker_id)
        assert "\n" not in str(raised.value)


class TestTexts:
    def test_addresses_hosts_and_versions_are_bounded_printable_text(self) -> None:
        """No control characters or line separators; each within its length."""
        assert valid_address("ipc:///tmp/run dir/worker-w0")
        assert not valid_address("") and not valid_address("ipc://x\n")
        assert not valid_address("ipc://" + "x" * 600)
        assert valid_host("") and valid_host("box-1.example") and not valid_host("a\u2028b")
        assert valid_version("1.2.3+local") and not valid_version("v" * 65)
        assert not valid_version("1\t2")

    def test_process_names(self) -> None:
        """Output-path names follow the worker-id rule."""
        assert valid_process_name("detokenizer-router") and valid_process_name("detokenizer-3")
        assert not valid_process_name("") and not valid_process_name("x\ny")


class TestShown:
    def test_a_string_is_escaped_onto_one_line_and_cut(self) -> None:
        """Newlines, escapes and non-ASCII are escaped; long strings cut at 80 characters."""
        assert shown("w0") == "'w0'"
        assert shown("a\nb\x1b[31m\u2028é") == "'a\\nb\\x1b[31m\\u2028\\xe9'"
        long = shown("x" * 1000)
        assert long.startswith("'" + "x" * 80 + "'") and long.endswith("(1000 chars)")


class TestBeaconKey:
    def test_a_beacon_carries_its_key(self) -> None:
        """The stack key goes in every beacon."""
        frames = IncarnationBeacon("detokenizer-0", incarnation=5, key="k" * 64).due(0.0)
        assert frames is not None
        news = decode_payload(decode_header(frames[0]).kind, frames[1])
        assert news.key == "k" * 64  # type: ignore[attr-defined]
