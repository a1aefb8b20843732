"""CURVE keys and the file of authorised public keys: what crossing hosts trusts.

Every ``tcp://`` connection between hosts is encrypted and authenticated with ZeroMQ's
CURVE mechanism. A host has one key pair, written by ``switchboard keys generate NAME``
(:func:`router_core.curve_files.write_key_pair`) as two files:

* ``NAME.secret`` (mode 600): ``public <z85>`` and ``secret <z85>``, one per line;
* ``NAME.public``: one line, ``<z85> NAME`` — exactly one line of an authorised-keys
  file, so ``cat worker-a.public >> authorised_keys`` authorises that host.

The control host keeps an **authorised-keys file**: one public key per line (40 Z85
characters), optionally followed by a name; blank lines and lines that start with ``#`` are
ignored (Z85 uses ``#`` too, so a comment is never put after a key).
:class:`AuthorisedKeys` rereads it when it changes, so a key is added or revoked without a
restart. A file that is missing or has a bad line authorises nobody until it is fixed
(fail closed: a typo made while revoking a key must not keep that key alive); connections
already open stay open, since CURVE authenticates once, at the handshake.

Pure (no zmq): the key types and the authorised-keys file; key pair files are
:mod:`router_core.curve_files`'.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from router_core.credentials import KeyFileError

__all__ = [
    "KEY_LENGTH",
    "AuthorisedKeys",
    "ClientKeys",
    "KeyPair",
    "check_control_curve",
    "decode_key",
    "parse_authorised_keys",
    "read_public_key",
    "valid_public_key",
]

logger = logging.getLogger(__name__)

#: A CURVE key in Z85 text: 32 bytes become 40 characters.
KEY_LENGTH: Final = 40
#: The largest authorised-keys file read (about 10,000 keys with names).
MAX_KEYS_FILE_BYTES: Final = 1 << 20
#: How often :class:`AuthorisedKeys` looks at the file for a change.
RECHECK_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class KeyPair:
    """One host's CURVE key pair, both halves in Z85 text (40 ASCII characters)."""

    public: str
    secret: str

    def __repr__(self) -> str:  # a secret never reaches a log through repr()
        return f"KeyPair(public={self.public!r}, secret=<hidden>)"


@dataclass(frozen=True, slots=True)
class ClientKeys:
    """What a CURVE client presents: its own key pair, and the public key of the server it
    connects to (a client refuses a server with any other key)."""

    pair: KeyPair
    server_public: str

    def __post_init__(self) -> None:
        if not valid_public_key(self.server_public):
            raise ValueError("the server's public key must be 40 Z85 characters")


#: Z85's alphabet (ZeroMQ RFC 32), each character's value its index.
_Z85: Final = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_Z85_VALUE: Final = {char: value for value, char in enumerate(_Z85)}


def decode_key(text: str) -> bytes | None:
    """The 32 bytes a 40-character Z85 key spells, or None if it spells none."""
    if len(text) != KEY_LENGTH:
        return None
    out = bytearray()
    for start in range(0, KEY_LENGTH, 5):
        value = 0
        for char in text[start : start + 5]:
            digit = _Z85_VALUE.get(char)
            if digit is None:
                return None
            value = value * 85 + digit
        if value >= 1 << 32:
            return None
        out += value.to_bytes(4, "big")
    return bytes(out)


def valid_public_key(text: str) -> bool:
    """Whether ``text`` is a CURVE key in Z85 (40 characters that decode to 32 bytes)."""
    return decode_key(text) is not None


def read_public_key(path: Path) -> str:
    """The key of a ``.public`` file (its first word); :class:`KeyFileError` if none."""
    try:
        words = path.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"public key file {path}: {exc}") from None
    if not words or not valid_public_key(words[0]):
        raise KeyFileError(f"public key file {path}: expected '<40 Z85 characters> [name]'")
    return words[0]


def parse_authorised_keys(text: str) -> tuple[dict[bytes, str], list[str]]:
    """The keys in an authorised-keys file's text, raw 32 bytes → name, and one message
    per bad line (``line N: …``). A key without a name is named by its first 8 characters."""
    keys: dict[bytes, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.strip()
        # Z85 itself uses '#', so only a whole line is a comment.
        if not content or content.startswith("#"):
            continue
        key, _, name = content.partition(" ")
        if not valid_public_key(key):
            problems.append(f"line {number}: {key[:12]!r}… is not a 40-character Z85 key")
            continue
        keys[decode_key(key) or b""] = name.strip() or key[:8]
    return keys, problems


@dataclass(frozen=True, slots=True)
class _Stamp:
    inode: int
    size: int
    mtime_ns: int


class AuthorisedKeys:
    """The authorised public keys in ``path``, reread when the file changes.

    :meth:`name_of` answers who a client key belongs to (None: not authorised). The file
    is looked at no more often than every ``recheck_s`` seconds of ``clock``, by inode,
    size and modification time; a change is logged once, with the number of keys or the
    problems found. ``on_invalid`` is called each time a change leaves the file unusable.
    """

    def __init__(
        self,
        path: Path,
        *,
        recheck_s: float = RECHECK_S,
        clock: Callable[[], float] = time.monotonic,
        on_invalid: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self._recheck_s = recheck_s
        self._clock = clock
        self._on_invalid = on_invalid
        self._stamp: _Stamp | None = None
        self._keys: Mapping[bytes, str] = {}
        self._checked_at: float | None = None
        #: The problems of the file as last read; empty when it is usable.
        self.problems: list[str] = []

    def load(self) -> None:
        """Read the file now; :class:`KeyFileError` if it is missing or has a bad line
        (used at start, where a bad file is a configuration error)."""
        self._refresh(force=True)
        if self.problems:
            raise KeyFileError(f"authorised keys file {self.path}: {'; '.join(self.problems)}")

    def name_of(self, client_key: bytes) -> str | None:
        """The name of an authorised 32-byte client key, or None."""
        self._refresh(force=False)
        return self._keys.get(client_key)

    def __len__(self) -> int:
        return len(self._keys)

    def _refresh(self, *, force: bool) -> None:
        now = self._clock()
        if not force and self._checked_at is not None and now - self._checked_at < self._recheck_s:
            return
        self._checked_at = now
        stamp, text, problem = _read(self.path)
        if not force and stamp == self._stamp and stamp is not None:
            return
        self._stamp = stamp
        keys, problems = parse_authorised_keys(text) if problem is None else ({}, [problem])
        self._keys, self.problems = ({} if problems else keys), problems
        if problems:
            logger.error(
                "authorised keys file %s authorises nobody until fixed: %s",
                self.path,
                "; ".join(problems),
            )
            if self._on_invalid is not None:
                self._on_invalid()
        else:
            logger.info("authorised keys file %s: %d keys", self.path, len(keys))


def _read(path: Path) -> tuple[_Stamp | None, str, str | None]:
    """The file's stamp and text, or a problem in place of the text."""
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            raw = handle.read(MAX_KEYS_FILE_BYTES + 1)
    except OSError as exc:
        return None, "", f"cannot be read ({exc.strerror})"
    stamp = _Stamp(info.st_ino, info.st_size, info.st_mtime_ns)
    if len(raw) > MAX_KEYS_FILE_BYTES:
        return stamp, "", f"larger than {MAX_KEYS_FILE_BYTES} bytes"
    try:
        return stamp, raw.decode("ascii"), None
    except UnicodeDecodeError:
        return stamp, "", "not ASCII text"


def check_control_curve(endpoint: str, pair: KeyPair | None, authorised: str | None) -> None:
    """``ValueError`` unless the key pair and the authorised-keys file are given together,
    and given at all for a ``tcp://`` control ``endpoint``."""
    if (pair is None) != (authorised is None):
        raise ValueError(
            "CURVE on the control socket needs both --control-key-pair and "
            "--control-authorised-keys"
        )
    if endpoint.startswith("tcp://") and pair is None:
        raise ValueError(
            f"the control endpoint {endpoint} is tcp://: it needs CURVE "
            "(--control-key-pair and --control-authorised-keys), as any process that "
            "reaches a tcp port could otherwise try the control commands"
        )
