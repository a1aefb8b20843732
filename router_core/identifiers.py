"""What an identifier from the wire may look like, and how one is shown in a log line.

Identifiers that peers send (a worker's id, its return address, host and version, an
output-path process's name) end up in the registry, in metric labels, in file names
(``worker-<id>``), in the admin console and in log and audit lines. Each is checked
here, where it is accepted, so that nothing downstream has to: a worker id is a short
name of letters, digits, ``.``, ``_`` and ``-`` (:data:`WORKER_ID_RULE`), and every
other identifier is printable text of bounded length (no newline, no control
character). :func:`shown` is how a string that failed a check (or any string from the
wire) appears in a log line: escaped and cut short, so it can never forge a line.

Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "MAX_ADDRESS_LENGTH",
    "MAX_HOST_LENGTH",
    "MAX_PROCESS_NAME_LENGTH",
    "MAX_VERSION_LENGTH",
    "MAX_WORKER_ID_LENGTH",
    "WORKER_ID_RULE",
    "check_worker_id",
    "shown",
    "valid_address",
    "valid_host",
    "valid_process_name",
    "valid_version",
    "valid_worker_id",
]

#: Longest worker id.
MAX_WORKER_ID_LENGTH: Final = 64
#: A worker id: a letter or digit, then up to 63 letters, digits, ``.``, ``_`` or ``-``.
WORKER_ID_RULE: Final = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
#: Longest return address (an ``ipc://`` path is at most 107 bytes on Linux).
MAX_ADDRESS_LENGTH: Final = 512
#: Longest host name (DNS allows 253).
MAX_HOST_LENGTH: Final = 255
#: Longest version string.
MAX_VERSION_LENGTH: Final = 64
#: Longest output-path process name (``detokenizer-<j>``).
MAX_PROCESS_NAME_LENGTH: Final = 64

_WORKER_ID: Final = re.compile(WORKER_ID_RULE, re.ASCII)
#: How much of a refused string a log line shows.
_SHOWN_LENGTH: Final = 80


def valid_worker_id(text: str) -> bool:
    """Whether ``text`` is a worker id (:data:`WORKER_ID_RULE`)."""
    return _WORKER_ID.fullmatch(text) is not None


def check_worker_id(text: str) -> str:
    """``text`` if it is a worker id, else ``ValueError`` saying the rule."""
    if not valid_worker_id(text):
        raise ValueError(
            f"worker id {shown(text)}: expected 1 to {MAX_WORKER_ID_LENGTH} of A-Z a-z 0-9 "
            ". _ -, starting with a letter or digit"
        )
    return text


def _printable(text: str, limit: int, *, empty: bool) -> bool:
    """Bounded printable text: no newline, tab, control or line-separator character."""
    return (empty or bool(text)) and len(text) <= limit and text.isprintable()


def valid_address(text: str) -> bool:
    """Whether ``text`` may be a return address as a string (non-empty, printable, at
    most :data:`MAX_ADDRESS_LENGTH`); the endpoint rules are checked apart."""
    return _printable(text, MAX_ADDRESS_LENGTH, empty=False)


def valid_host(text: str) -> bool:
    """Whether ``text`` may be a worker's host (printable, at most 255, may be empty)."""
    return _printable(text, MAX_HOST_LENGTH, empty=True)


def valid_version(text: str) -> bool:
    """Whether ``text`` may be a worker's version (printable, at most 64, may be empty)."""
    return _printable(text, MAX_VERSION_LENGTH, empty=True)


def valid_process_name(text: str) -> bool:
    """Whether ``text`` may name an output-path process: the worker-id rule (so
    ``detokenizer-router`` and ``detokenizer-0`` pass)."""
    return _WORKER_ID.fullmatch(text) is not None


def shown(text: str) -> str:
    """``text`` as a log line may show it: quoted, every non-ASCII or non-printable
    character escaped (``\\n``, ``\\x1b``, ``\\u2028``), at most 80 characters of it."""
    if len(text) <= _SHOWN_LENGTH:
        return ascii(text)
    return f"{text[:_SHOWN_LENGTH]!a}...({len(text)} chars)"
