"""``up --detach``'s pure parts: the start verdict, the run dir's record and lock, the
log tail, and the detached supervisor's command line."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from switchboard.cli import build_parser
from switchboard.cli.down import _DEFAULT_TIMEOUT_S
from switchboard.supervisor.cli import _child_argv
from switchboard.supervisor.detach import failure_cause, judge_start
from switchboard.supervisor.down import DEFAULT_DOWN_TIMEOUT_S, remove_dead_sockets
from switchboard.supervisor.log_tail import follow, last_lines
from switchboard.supervisor.stack_record import (
    RECORD_FILE,
    LockBusy,
    StackRecord,
    detached_record,
    hold_lock,
    lock_held,
    read_record,
    write_record,
)

OURS = StackRecord(pid=4242, pgid=4242, incarnation="abc", state="serving", serving_line="x")


class TestJudgeStart:
    """Only this start's own record, saying serving, is success."""

    def test_our_serving_record_serves(self) -> None:
        """The record with our pid and incarnation, serving, is the verdict serving."""
        verdict = judge_start(None, OURS, pid=4242, incarnation="abc", expired=False)
        assert verdict.kind == "serving" and verdict.record == OURS

    @pytest.mark.parametrize(
        "record",
        [
            None,
            StackRecord(4242, 4242, "abc", "starting"),
            StackRecord(4242, 4242, "someone-else", "serving", "x"),
            StackRecord(9999, 9999, "abc", "serving", "x"),
        ],
    )
    def test_anything_else_waits(self, record: StackRecord | None) -> None:
        """No record, a starting one, another start's or another pid's: still waiting."""
        assert judge_start(None, record, pid=4242, incarnation="abc", expired=False).kind == (
            "waiting"
        )

    def test_foreign_serving_stack_times_out(self) -> None:
        """Another stack's serving record never passes for ours, even at the deadline."""
        foreign = StackRecord(1, 1, "other", "serving", "x")
        verdict = judge_start(None, foreign, pid=4242, incarnation="abc", expired=True)
        assert verdict.kind == "timed_out"

    def test_exit_beats_a_serving_record(self) -> None:
        """A supervisor that exited failed, whatever its record still says."""
        verdict = judge_start(1, OURS, pid=4242, incarnation="abc", expired=False)
        assert (verdict.kind, verdict.detail) == ("exited", "exit status 1")


class TestFailureCause:
    """The log line that says why a start failed."""

    def test_startup_failed_line_wins_over_later_errors(self) -> None:
        """The supervisor's ``startup failed`` line names the child, however much follows."""
        lines = [
            "x INFO started engine",
            "x ERROR switchboard.supervisor[1]: startup failed: engine (pid 2) exited",
            "x ERROR uvicorn: noise while stopping",
            "x INFO stopped router",
        ]
        assert failure_cause(lines) == lines[1]

    def test_refusal_line(self) -> None:
        """A setting refused before anything started is its one ``switchboard up:`` line."""
        assert failure_cause(["switchboard up: port 8000: already in use on 127.0.0.1"]) == (
            "switchboard up: port 8000: already in use on 127.0.0.1"
        )

    def test_last_error_otherwise_none(self) -> None:
        """Without either, the last ERROR line; without any, None."""
        assert failure_cause(["a ERROR one", "b ERROR two", "c INFO"]) == "b ERROR two"
        assert failure_cause(["c INFO"]) is None


class TestStackRecord:
    """The record survives a round trip; a damaged one reads as none."""

    def test_round_trip_private(self, tmp_path: Path) -> None:
        """What is written is read back, from a file only its owner can read."""
        write_record(tmp_path, OURS)
        assert read_record(tmp_path) == OURS
        assert (tmp_path / RECORD_FILE).stat().st_mode & 0o777 == 0o600

    @pytest.mark.parametrize("text", ["", "{", "[]", '{"format": "other/1"}', '{"pid": 1}'])
    def test_damaged_record_is_none(self, tmp_path: Path, text: str) -> None:
        """Text that is not a record of this format is no record."""
        (tmp_path / RECORD_FILE).write_text(text)
        assert read_record(tmp_path) is None


class TestLock:
    """The lock is held exactly while its holder lives."""

    def test_held_then_dropped(self, tmp_path: Path) -> None:
        """A held lock is seen held and refuses a second holder; closed, it is free."""
        assert not lock_held(tmp_path)
        descriptor = hold_lock(tmp_path)
        try:
            assert lock_held(tmp_path)
            with pytest.raises(LockBusy):
                hold_lock(tmp_path)
        finally:
            os.close(descriptor)
        assert not lock_held(tmp_path)

    def test_held_by_another_process(self, tmp_path: Path) -> None:
        """A lock another process holds is seen held until that process exits."""
        code = (
            "import sys; from pathlib import Path\n"
            "from switchboard.supervisor.stack_record import hold_lock\n"
            "hold_lock(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()"
        )
        holder = subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline() == b"held\n"
            assert lock_held(tmp_path)
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
            holder.stdout.close()
        assert not lock_held(tmp_path)

    def test_detached_record_lifecycle(self, tmp_path: Path) -> None:
        """Inside: locked, recorded starting then serving; after: no record, unlocked."""
        with detached_record(tmp_path, "tok") as announce:
            assert lock_held(tmp_path)
            record = read_record(tmp_path)
            assert record is not None and (record.pid, record.state) == (os.getpid(), "starting")
            announce("switchboard: serving ...")
            record = read_record(tmp_path)
            assert record is not None and record.state == "serving"
            assert record.serving_line == "switchboard: serving ..."
        assert read_record(tmp_path) is None and not lock_held(tmp_path)


class TestLastLines:
    """The last N lines, read from the end."""

    @pytest.mark.parametrize(
        ("data", "count", "expected"),
        [
            (b"", 3, b""),
            (b"a\nb\nc\n", 0, b""),
            (b"a\nb\nc\n", 2, b"b\nc\n"),
            (b"a\nb\nc\n", 9, b"a\nb\nc\n"),
            (b"a\nb\nc", 1, b"c"),
            (b"x" * 200_000 + b"\nlast\n", 1, b"last\n"),
        ],
    )
    def test_tail(self, data: bytes, count: int, expected: bytes) -> None:
        """Whole lines from the end; an unterminated last line counts; blocks join."""
        assert last_lines(io.BytesIO(data), count) == expected

    def test_start_bounds_the_tail(self) -> None:
        """Nothing before ``start`` is returned (an earlier run's lines)."""
        assert last_lines(io.BytesIO(b"old\nnew\n"), 5, start=4) == b"new\n"


class TestFollow:
    """Following ends on stop, or once the writer is gone and the rest is written."""

    def test_writer_gone_ends_after_the_rest(self, tmp_path: Path) -> None:
        """Lines appended before the writer's end are all passed on, then it returns."""
        log = tmp_path / "log"
        log.write_bytes(b"seen\nnew\n")
        got: list[bytes] = []
        follow(log, got.append, threading.Event(), lambda: False, offset=5, interval_s=0.01)
        assert got == [b"new\n"]

    def test_stop_ends_it(self, tmp_path: Path) -> None:
        """A set stop event returns at once, with a live writer."""
        stop = threading.Event()
        stop.set()
        follow(tmp_path / "missing", lambda _: None, stop, lambda: True, offset=0)

    def test_truncated_file_is_read_from_its_start(self, tmp_path: Path) -> None:
        """A file shorter than the offset is read again from offset 0."""
        log = tmp_path / "log"
        log.write_bytes(b"fresh\n")
        got: list[bytes] = []
        follow(log, got.append, threading.Event(), lambda: False, offset=100, interval_s=0.01)
        assert got == [b"fresh\n"]


class TestDetachedCommandLine:
    """The detached supervisor gets this up's settings, not --detach."""

    def test_flags_are_passed_on(self) -> None:
        """Given settings and the config file pass on; booleans keep their polarity."""
        args = build_parser("up").parse_args(
            ["up", "--detach", "--port", "9000", "--no-metrics", "--config", "s.toml"]
        )
        argv = _child_argv(args)
        assert argv[:4] == [sys.executable, "-m", "switchboard.cli", "up"]
        assert "--detach" not in argv
        assert argv[4:] == ["--config", "s.toml", "--port", "9000", "--no-metrics"]


class TestDown:
    """down's defaults and clean-up."""

    def test_cli_default_matches(self) -> None:
        """The parser's default timeout is the supervisor module's."""
        assert _DEFAULT_TIMEOUT_S == DEFAULT_DOWN_TIMEOUT_S

    def test_dead_sockets_removed_live_kept(self, tmp_path: Path) -> None:
        """A socket file nobody listens on is removed; a listened one and a file stay."""
        import socket

        live, dead = tmp_path / "live", tmp_path / "dead"
        (tmp_path / "plain").write_text("")
        with socket.socket(socket.AF_UNIX) as listener, socket.socket(socket.AF_UNIX) as gone:
            listener.bind(str(live))
            listener.listen()
            gone.bind(str(dead))
            assert remove_dead_sockets(tmp_path) == [dead]
        assert live.exists() and (tmp_path / "plain").exists()
