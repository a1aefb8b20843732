"""Reading the detached supervisor's log: its last lines, and following what it appends.

Only the end of a file is read (backwards, in blocks), so a long-lived stack's log
costs no more to tail than a fresh one's. Following polls the file's size; it never
blocks longer than one poll interval, so a stop request is honoured within it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["follow", "last_lines", "tail_text"]

_BLOCK = 64 * 1024
#: How long one look at a followed file waits before the next.
POLL_INTERVAL_S = 0.2


def last_lines(stream: BinaryIO, count: int, *, start: int = 0) -> bytes:
    """The last ``count`` lines of ``stream`` after offset ``start`` (a last line without
    its newline counts); the stream is left at its end."""
    end = stream.seek(0, os.SEEK_END)
    if count <= 0:
        return b""
    position, data = end, b""
    # count + 1 newlines are enough: the one before the first line wanted bounds it.
    while position > start and data.count(b"\n") <= count:
        step = min(_BLOCK, position - start)
        position -= step
        stream.seek(position)
        data = stream.read(step) + data
    stream.seek(end)
    body = data[:-1] if data.endswith(b"\n") else data  # a final newline ends, not starts, a line
    cut = len(body)
    for _ in range(count):
        cut = body.rfind(b"\n", 0, cut)
        if cut < 0:
            return data
    return data[cut + 1 :]


def tail_text(path: Path, count: int, *, start: int = 0) -> str:
    """The last ``count`` lines of the file at ``path`` after offset ``start`` as text
    (undecodable bytes replaced); empty if it cannot be read."""
    try:
        with open(path, "rb") as stream:
            return last_lines(stream, count, start=start).decode(errors="replace")
    except OSError:
        return ""


def follow(
    path: Path,
    write: Callable[[bytes], None],
    stop: threading.Event,
    keep_going: Callable[[], bool],
    *,
    offset: int,
    interval_s: float = POLL_INTERVAL_S,
) -> None:
    """Pass what is appended to ``path`` after ``offset`` to ``write`` until ``stop`` is
    set, or ``keep_going()`` turns false (the writer is gone) and the rest is written.

    A file that shrinks (truncated, or replaced by a shorter one) is read again from its
    start. Errors of ``write`` propagate (a closed pipe ends the loop).
    """
    while not stop.is_set():
        writer_alive = keep_going()  # asked before reading, so its last lines are read
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < offset:
            offset = 0
        if size > offset:
            with open(path, "rb") as stream:
                stream.seek(offset)
                chunk = stream.read(size - offset)
            offset += len(chunk)
            write(chunk)
        if not writer_alive:
            return
        stop.wait(interval_s)
