"""This process's CPU time and resident memory, as the kernel tells them."""

from __future__ import annotations

import os
from pathlib import Path

from router_core.process_usage import cpu_seconds, resident_bytes


def test_cpu_seconds_grow_with_work() -> None:
    before = cpu_seconds()
    total = 0
    while cpu_seconds() - before < 0.05:  # bounded: 50 ms of CPU, seconds at most
        total += sum(range(10_000))
    assert total > 0 and cpu_seconds() > before


def test_resident_bytes_are_this_processs() -> None:
    """statm's second field in pages; an interpreter holds megabytes, far below 64 GiB."""
    assert 8 * 2**20 <= resident_bytes() < 64 * 2**30
    pages = int(Path(f"/proc/{os.getpid()}/statm").read_text().split()[1])
    assert abs(resident_bytes() - pages * os.sysconf("SC_PAGE_SIZE")) < 64 * 2**20


def test_an_unreadable_reading_is_zero(tmp_path: Path) -> None:
    """No /proc, or a file of another shape: 0, never an exception."""
    assert resident_bytes(tmp_path / "missing") == 0
    (tmp_path / "short").write_text("12")
    assert resident_bytes(tmp_path / "short") == 0
    (tmp_path / "words").write_text("a b c")
    assert resident_bytes(tmp_path / "words") == 0
    (tmp_path / "good").write_text("100 3 2 1 0 0 0")
    assert resident_bytes(tmp_path / "good") == 3 * os.sysconf("SC_PAGE_SIZE")
