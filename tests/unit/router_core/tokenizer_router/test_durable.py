"""The router's durable state: the file (atomic, private, unreadable files set aside),
the drain marks (bounded) and the incarnation rule."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from router_core.tokenizer_router.durable import (
    DrainMarks,
    DurableState,
    StateFile,
    next_incarnation,
)

STATE = DurableState(incarnation=7, paused=True, mode="retract", op_id="7-3", seq=3, drained=["a"])


class TestStateFile:
    def test_a_saved_state_loads_back(self, tmp_path: Path) -> None:
        """Save then load gives the same state; the file is private (0600)."""
        file = StateFile(tmp_path / "router-state.json")
        file.save(STATE)
        assert file.load() == STATE
        assert stat.S_IMODE(file.path.stat().st_mode) == 0o600

    def test_save_replaces_whole_and_leaves_no_temporary(self, tmp_path: Path) -> None:
        """A second save replaces the first; nothing else is left in the directory."""
        file = StateFile(tmp_path / "router-state.json")
        file.save(STATE)
        newer = DurableState(incarnation=8, seq=4, op_id="8-4")
        file.save(newer)
        assert file.load() == newer
        assert [p.name for p in tmp_path.iterdir()] == ["router-state.json"]

    def test_no_file_is_a_fresh_start(self, tmp_path: Path) -> None:
        assert StateFile(tmp_path / "absent.json").load() is None

    def test_an_unreadable_file_is_set_aside_and_logged(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Garbage: a fresh start, the file moved to .unreadable, the log names it."""
        path = tmp_path / "router-state.json"
        path.write_bytes(b'{"incarnation": "not a number"')
        assert StateFile(path).load() is None
        assert not path.exists() and (tmp_path / "router-state.json.unreadable").exists()
        assert str(path) in caplog.text and "unreadable" in caplog.text

    def test_another_version_is_not_read(self, tmp_path: Path) -> None:
        path = tmp_path / "router-state.json"
        path.write_text('{"version": 99, "incarnation": 5}')
        assert StateFile(path).load() is None

    def test_a_failed_save_raises_and_leaves_the_old_state(self, tmp_path: Path) -> None:
        """A save into a directory that is gone raises OSError (the router logs it)."""
        file = StateFile(tmp_path / "gone" / "router-state.json")
        with pytest.raises(OSError):
            file.save(STATE)


class TestIncarnations:
    def test_the_clock_when_no_state(self) -> None:
        assert next_incarnation(None, 1_000) == 1_000

    def test_always_above_the_saved_one(self) -> None:
        """Even with the clock stepped back, a restart's incarnation is larger."""
        assert next_incarnation(DurableState(incarnation=5_000), 1_000) == 5_001
        assert next_incarnation(DurableState(incarnation=5_000), 9_000) == 9_000


class TestDrainMarks:
    def test_mark_unmark_and_order(self) -> None:
        marks = DrainMarks(["a", "b"])
        marks.mark("c")
        marks.unmark("a")
        assert marks.ids() == ["b", "c"] and "c" in marks and "a" not in marks

    def test_bounded_oldest_forgotten(self) -> None:
        """Beyond the limit the oldest mark goes: the set never grows past it."""
        marks = DrainMarks(limit=3)
        for index in range(10):
            marks.mark(f"w{index}")
        assert marks.ids() == ["w7", "w8", "w9"] and len(marks) == 3


class TestLeftovers:
    def test_a_temporary_of_a_killed_save_is_removed_at_load(self, tmp_path: Path) -> None:
        """A router SIGKILLed mid-save leaves ``.router-state.json.<pid>.tmp``; the next
        start removes it, so restarts leave nothing behind."""
        file = StateFile(tmp_path / "router-state.json")
        file.save(STATE)
        (tmp_path / ".router-state.json.4242.tmp").write_bytes(b"{half")
        assert file.load() == STATE
        assert sorted(p.name for p in tmp_path.iterdir()) == ["router-state.json"]
