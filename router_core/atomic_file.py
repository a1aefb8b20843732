"""Files that outlive a process: written whole or not at all.

A process that keeps state across its own restarts (the tokenizer router's pause state,
the detokenizer router's worker assignment) writes it with :func:`write_atomic`: to a
temporary file in the same directory, flushed to disk, renamed over the old file, and
the directory synced, so a reader (the next start) sees the old content or the new one,
never a torn one. A process killed mid-write leaves its temporary behind;
:func:`remove_stale_temporaries` clears them at the next start.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["remove_stale_temporaries", "write_atomic"]


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically and durably (file ``mode``, private by
    default); raises ``OSError``, leaving the old file as it was."""
    temporary = _temporary(path)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    # The rename itself must reach the disk: sync the directory that holds it.
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def remove_stale_temporaries(path: Path) -> None:
    """Delete what writes of ``path`` by killed processes left behind."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)
