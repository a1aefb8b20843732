"""The operator commands' text: tables, durations and each answer's layout."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.admin_cli import render
from switchboard.admin_cli.answers import Load, Operation, Status, Worker, decode
from switchboard.admin_cli.errors import UnexpectedAnswer
from tests.unit.switchboard.admin_cli.api_bodies import LOAD, NOW, operation, status, worker


def workers_text(*items: dict[str, Any]) -> str:
    """``switchboard workers``' table of API workers."""
    return render.workers_table([decode(Worker, item) for item in items])


def status_text(body: dict[str, Any]) -> str:
    """``switchboard status``' text of an API status, at NOW."""
    return render.status_text(decode(Status, body), NOW)


def operation_text(body: dict[str, Any]) -> str:
    """``switchboard pause``' text of an API operation."""
    return render.operation_text(decode(Operation, body))


def load_text(body: dict[str, Any] | None) -> str:
    """``switchboard load``' text of an API load (or none)."""
    return render.load_text(None if body is None else decode(Load, body))


class TestTable:
    """Columns are aligned, numbers flush right, no trailing spaces."""

    def test_aligns_columns(self) -> None:
        """Every column starts at the same offset on every line."""
        text = render.table(["A", "LONGER"], [["xyz", "1"], ["q", "22"]], right=(1,))
        assert text.splitlines() == ["A    LONGER", "xyz       1", "q        22"]

    def test_no_trailing_spaces(self) -> None:
        """A short last cell leaves no padding behind it."""
        text = render.table(["A", "B"], [["1", ""], ["2", "long"]])
        assert all(line == line.rstrip() for line in text.splitlines())

    def test_key_values(self) -> None:
        """Values line up after the longest key."""
        assert render.key_values([("a", "1"), ("long", "2")]) == "a     1\nlong  2"


class TestDurations:
    """Ages and barrier times read the way operators say them."""

    @pytest.mark.parametrize(
        ("seconds", "text"),
        [
            (None, "-"),
            (0.04, "0.0s"),
            (0.44, "0.4s"),
            (59.9, "59.9s"),
            (60, "1m00s"),
            (185, "3m05s"),
            (3600, "1h00m"),
            (7800, "2h10m"),
            (86400 * 3 + 3600 * 4, "3d04h"),
            (-0.2, "0.0s"),
        ],
    )
    def test_ago(self, seconds: float | None, text: str) -> None:
        """Seconds to a tenth under a minute, then two units."""
        assert render.ago(seconds) == text

    def test_elapsed_to_the_millisecond(self) -> None:
        """A barrier's duration keeps milliseconds."""
        assert render.elapsed(0.0123) == "0.012s"
        assert render.elapsed(None) == "-"

    def test_clock_today_and_before(self) -> None:
        """Today's times show the time of day; older ones the date too."""
        assert render.clock(NOW - 5, NOW) == "11:59:55"
        assert render.clock(NOW - 86400, NOW) == "2026-03-03 12:00:00"
        assert render.clock(None, NOW) == "-"


class TestNames:
    """Lists of worker ids."""

    def test_all_and_none(self) -> None:
        """Names joined by commas; none is a dash."""
        assert render.names(["a", "b"]) == "a, b"
        assert render.names([]) == "-"
        assert render.names(None) == "-"

    def test_long_lists_counted(self) -> None:
        """Past the limit the rest is counted."""
        assert render.names(["a", "b", "c", "d"], 2) == "a, b, +2 more"


class TestWorkersTable:
    """``switchboard workers``: id, state, in-flight, heartbeat, requests, safe to delete."""

    def test_columns(self) -> None:
        """Each worker is one row under the six headers."""
        lines = workers_text(
            worker(), worker("w1", state="drained", inflight=0, safe_to_delete=True)
        ).splitlines()
        assert lines[0].split() == [
            "ID", "STATE", "INFLIGHT", "LAST", "HEARTBEAT", "REQUESTS", "SAFE", "TO", "DELETE",
        ]  # fmt: skip
        assert lines[1].split() == ["w0", "serving", "3", "0.4s", "ago", "120", "no"]
        assert lines[2].split() == ["w1", "drained", "0", "0.4s", "ago", "120", "yes"]

    def test_numbers_flush_right(self) -> None:
        """In-flight counts end in the same column."""
        lines = workers_text(worker(inflight=5), worker("w1", inflight=1234))
        rows = lines.splitlines()
        assert rows[1].index("5") + 1 == rows[2].index("1234") + 4

    def test_reason_only_when_departed(self) -> None:
        """A REASON column appears when a dead worker says why it left."""
        assert "REASON" not in workers_text(worker())
        text = workers_text(
            worker(), worker("w9", state="dead", departure_reason="heartbeat timeout")
        )
        assert text.splitlines()[0].endswith("REASON")
        assert text.splitlines()[2].endswith("heartbeat timeout")

    def test_missing_heartbeat(self) -> None:
        """A worker without a heartbeat age shows a dash."""
        row = workers_text(worker(last_heartbeat_s_ago=None)).splitlines()[1]
        assert row.split() == ["w0", "serving", "3", "-", "120", "no"]

    def test_empty(self) -> None:
        """No workers is a sentence, not an empty table."""
        assert render.workers_table([]) == "no workers"

    def test_missing_id_raises(self) -> None:
        """A worker without an id is not a worker: an unexpected answer, reported by the
        command."""
        with pytest.raises(UnexpectedAnswer):
            workers_text({"state": "serving"})


class TestStatusText:
    """``switchboard status``: pause state, engine, workers, versions, operations."""

    def test_running_stack(self) -> None:
        """Not paused: since when, engine load, workers by state in lifecycle order."""
        text = status_text(status())
        lines = text.splitlines()
        assert lines[0] == "paused    no, since 11:58:55 (1m05s ago)"
        assert lines[1] == "mode      -"
        assert lines[2] == (
            "engine    live; running 3 of 256, waiting 1, token usage 12%, step 1234"
        )
        assert lines[3] == "workers   2 serving, 1 draining"
        assert lines[4] == "versions  admin 0.1.0, router 0.1.0"
        assert lines[5] == "router    pid 99, up 1h02m"
        assert text.endswith("recent operations: none")

    def test_paused_with_operations(self) -> None:
        """Paused shows YES and the mode; each operation its acks and stragglers."""
        ops = [
            operation(),
            operation(
                seq=8,
                action="continue",
                mode=None,
                complete=False,
                acked=["w0"],
                stragglers=["w1"],
                elapsed_s=2.0,
            ),
        ]
        text = status_text(status(paused=True, pause_mode="in_place", recent_operations=ops))
        lines = text.splitlines()
        assert lines[0].startswith("paused    YES, since")
        assert lines[1] == "mode      in_place"
        header = lines.index("recent operations (newest last)")
        table = lines[header + 1 :]
        assert table[0].split() == [
            "SEQ", "ACTION", "MODE", "RESULT", "ELAPSED", "FINISHED", "ACKED", "STRAGGLERS",
        ]  # fmt: skip
        assert table[1].split() == [
            "7", "pause", "in_place", "complete", "0.012s", "11:59:55", "engine,", "w0,", "w1", "-",
        ]  # fmt: skip
        assert table[2].split() == [
            "8", "continue", "-", "TIMED", "OUT", "2.000s", "11:59:55", "w0", "w1",
        ]  # fmt: skip

    def test_many_acks_counted(self) -> None:
        """Dozens of acknowledgements do not make a row wrap."""
        acked = [f"w{i}" for i in range(12)]
        text = status_text(status(recent_operations=[operation(acked=acked)]))
        assert "w0, w1, w2, w3, +8 more" in text

    def test_engine_down(self) -> None:
        """An engine that is not live says so, loudly."""
        text = status_text(status(engine={"live": False, "load": None}))
        assert "engine    NOT CONNECTED" in text.splitlines()

    def test_engine_live_without_load(self) -> None:
        """Live but no report yet."""
        text = status_text(status(engine={"live": True, "load": None}))
        assert "engine    live; no load report yet" in text.splitlines()

    def test_optional_sections(self) -> None:
        """Without versions or router facts, those lines are left out."""
        minimal = {"paused": False}
        text = status_text(minimal)
        assert text.splitlines()[0] == "paused   no"
        assert "versions" not in text
        assert "workers  none" in text.splitlines()

    def test_paused_is_required(self) -> None:
        """An answer without ``paused`` is not a status."""
        with pytest.raises(UnexpectedAnswer):
            status_text({})


class TestOperationText:
    """``switchboard pause`` and ``continue``: the result line, acks and stragglers."""

    def test_complete(self) -> None:
        """A complete pause names its mode and everyone who acknowledged."""
        assert operation_text(operation()).splitlines() == [
            "pause (in_place): complete in 0.012s (seq 7)",
            "acked       engine, w0, w1",
            "stragglers  -",
            "departed    -",
        ]

    def test_timed_out(self) -> None:
        """A timed-out continue names the stragglers and who left meanwhile."""
        text = operation_text(
            operation(
                action="continue",
                mode=None,
                complete=False,
                acked=["engine"],
                stragglers=["w1", "w2"],
                departed=["w3"],
                elapsed_s=2.004,
            )
        )
        assert text.splitlines() == [
            "continue: TIMED OUT after 2.004s (seq 7)",
            "acked       engine",
            "stragglers  w1, w2",
            "departed    w3",
        ]


class TestLoadText:
    """``switchboard load``."""

    def test_snapshot(self) -> None:
        """Every load field, usage as a percentage, with the report's age."""
        assert load_text(LOAD).splitlines() == [
            "running      3 of 256",
            "waiting      1",
            "token usage  12.5%",
            "step         1234",
            "reported     0.1s ago",
        ]

    def test_none_yet(self) -> None:
        """No report yet is a sentence."""
        assert load_text(None) == "the engine has not reported its load yet"
