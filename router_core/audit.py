"""The audit log's one format, shared by the admin app and the routers.

:class:`AuditLog` writes one record per mutation, given as keyword fields
(``who``, ``action``, ``target``, ``result``, ``status``, ``reason``, ``detail``, ...):

* to its logger, as one line ``audit key=value key=value ...`` at INFO. Every value
  goes through :func:`escape_value`, so a line is always one line of printable text:
  no value can end it early, start a forged one, or hide behind a terminal escape;
* and, when a file is given, to that file as one JSON object per line (``time`` in UTC
  first, then the fields in the order given; ``ensure_ascii``, so the line is ASCII).
  The file is opened append-only (``O_APPEND``; created with mode 0600, an existing
  file keeps its mode), and each line goes out in one unbuffered ``write``, so it is on
  disk as soon as :meth:`AuditLog.record` returns and lines written by several processes
  to one file never interleave.

Writing the file never fails a caller: the first failure is logged (once, on the audit
logger at ERROR), every failure is counted (:attr:`AuditLog.write_failures`), and the
logger's line is written regardless. The count is logged (WARNING) when the file takes
a record again after failures, and when the log is closed after any.

Keys are part of the format, not data: a key outside ``[a-z][a-z0-9_]*`` (at most 32
characters) or the reserved ``time`` is a programming error, a :class:`ValueError`. A
string longer than :data:`MAX_VALUE_CHARS` is cut there, with ``...(+N chars)`` saying
how much was left out.

Pure standard library (no zmq, no HTTP): the routers and the admin app both import it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = ["MAX_VALUE_CHARS", "AuditLog", "AuditValue", "escape_value", "format_fields"]

#: What a field may hold.
AuditValue = str | int | float | bool | None

#: The longest string value kept whole, in characters.
MAX_VALUE_CHARS: Final = 1024
#: Mode of a newly created audit file: its owner's alone.
FILE_MODE: Final = 0o600

_KEY: Final = re.compile(r"[a-z][a-z0-9_]{0,31}")
_RESERVED: Final = frozenset({"time"})
#: Printable characters that still need quoting: they would split or fake a field.
_QUOTED: Final = frozenset("\"'=\\")
_NAMED_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _truncated(text: str) -> str:
    if len(text) <= MAX_VALUE_CHARS:
        return text
    return f"{text[:MAX_VALUE_CHARS]}...(+{len(text) - MAX_VALUE_CHARS} chars)"


def _escape_char(char: str) -> str:
    named = _NAMED_ESCAPES.get(char)
    if named is not None:
        return named
    if char == " " or char.isprintable():
        return char
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    if point < 0x10000:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return _truncated(str(value))


def escape_value(value: object) -> str:
    """``value`` as one field value: bare when it is non-empty printable text without
    whitespace, quotes, ``=`` or backslash; otherwise in double quotes, with ``"`` and
    ``\\`` backslashed, newline, CR and tab as ``\\n \\r \\t``, and every other character
    that is not printable (controls, ESC, DEL, line separators, format characters, lone
    surrogates) as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``. None is ``-`` (and the string
    ``"-"`` quoted), booleans ``true``/``false``, numbers as Python writes them."""
    text = _text(value)
    if value is not None and text == "-":
        return '"-"'
    if text and all(
        char.isprintable() and not char.isspace() and char not in _QUOTED for char in text
    ):
        return text
    return '"' + "".join(_escape_char(char) for char in text) + '"'


def _check_key(key: str) -> None:
    if not _KEY.fullmatch(key) or key in _RESERVED:
        raise ValueError(f"{key!r} cannot be an audit field's name")


def format_fields(fields: Mapping[str, object]) -> str:
    """``key=value ...`` for ``fields`` in their order, each value :func:`escape_value`'d;
    ValueError for a key outside the safe set (see the module docstring)."""
    for key in fields:
        _check_key(key)
    return " ".join(f"{key}={escape_value(value)}" for key, value in fields.items())


def _json_value(value: object) -> AuditValue:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return _truncated(str(value))


class AuditLog:
    """Audit records to ``logger`` and, when ``file`` is given, to that JSON-lines file
    (see the module docstring). The file is opened by :meth:`open` (which raises
    ``OSError`` when it cannot be, for a caller that wants to refuse to start) or else
    by the first :meth:`record`; :meth:`close` closes it, after which records go to the
    logger only. Safe to share between threads."""

    def __init__(
        self,
        logger: logging.Logger,
        file: Path | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._logger = logger
        self._path = file
        self._clock = clock
        self._fd: int | None = None
        self._closed = False
        self._failures = 0
        self._failing = False
        self._lock = threading.Lock()

    @property
    def file(self) -> Path | None:
        """The JSON-lines file, if any."""
        return self._path

    @property
    def write_failures(self) -> int:
        """Records the file did not get (it could not be opened or written)."""
        return self._failures

    def open(self) -> None:
        """Open the file now (nothing to do without one, or once open); ``OSError`` when
        it cannot be opened for appending."""
        with self._lock:
            self._open_locked()

    def _open_locked(self) -> int | None:
        if self._path is None or self._closed:
            return None
        if self._fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            self._fd = os.open(self._path, flags, FILE_MODE)
        return self._fd

    def record(self, **fields: AuditValue) -> None:
        """Write one record of ``fields`` (in their order); ValueError for a bad key.
        Never raises for the file (see the module docstring)."""
        line = format_fields(fields)
        self._logger.info("audit %s", line)
        if self._path is None:
            return
        stamp = datetime.fromtimestamp(self._clock(), UTC).isoformat(timespec="milliseconds")
        document = {"time": stamp, **{key: _json_value(value) for key, value in fields.items()}}
        encoded = (json.dumps(document, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
        with self._lock:
            try:
                fd = self._open_locked()
                if fd is None:
                    return
                written = 0
                while written < len(encoded):
                    written += os.write(fd, encoded[written:])
            except OSError as exc:
                self._failures += 1
                self._failing = True
                if self._failures == 1:
                    self._logger.error(
                        "cannot write the audit file %s (%s); audit lines still go to this "
                        "log, and further failures are only counted",
                        self._path,
                        exc.strerror or exc,
                    )
                return
            if self._failing:
                self._failing = False
                self._logger.warning(
                    "the audit file %s is written again; %d records so far could not be",
                    self._path,
                    self._failures,
                )

    def close(self) -> None:
        """Close the file; later records go to the logger only."""
        with self._lock:
            if self._failures and not self._closed:
                self._logger.warning(
                    "%d audit records could not be written to %s", self._failures, self._path
                )
            self._closed = True
            if self._fd is not None:
                fd, self._fd = self._fd, None
                os.close(fd)

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
