"""Tests for StopChecker (switchboard.text.stop): stop strings held back while they may
still match, and released or cut when they cannot."""

from __future__ import annotations

from switchboard.text import StopChecker


class TestStopChecker:
    """StopChecker on text alone."""

    def test_holds_possible_prefix(self) -> None:
        """A suffix that could begin a stop string is held until it cannot."""
        checker = StopChecker(["</end>"])
        assert checker.push("text </e").text == "text "
        assert checker.pending == "</e"
        assert checker.push("x").text == "</ex"

    def test_overlapping_prefix(self) -> None:
        """With stop "aab", "aaab" releases only "a" and then matches."""
        checker = StopChecker(["aab"])
        assert [checker.push(c).text for c in "aaa"] == ["", "", "a"]
        assert checker.push("b").matched == "aab"

    def test_flush_releases_held_text(self) -> None:
        """flush returns the held text once and clears it."""
        checker = StopChecker(["STOP"])
        assert checker.push("go ST").text == "go "
        assert checker.flush() == "ST"
        assert checker.flush() == ""

    def test_empty_stop_strings_ignored(self) -> None:
        """An empty stop string never matches."""
        assert StopChecker(["", ""]).push("anything").matched is None

    def test_earliest_completed_match_wins(self) -> None:
        """Of "bc" and "abcd", "bc" completes first, as a streaming reader would see."""
        assert StopChecker(["abcd", "bc"]).push("xabcd").matched == "bc"
