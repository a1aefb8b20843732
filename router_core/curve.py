"""CURVE key pairs and the file of authorised public keys: what crossing hosts trusts.

Every ``tcp://`` connection between hosts is encrypted and authenticated with ZeroMQ's
CURVE mechanism. A host has one key pair, written by ``switchboard keys generate NAME``
(:func:`write_key_pair`) as two files:

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
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import zmq
from zmq.utils import z85

from router_core.credentials import KeyFileError, check_private

__all__ = [
    "KEY_LENGTH",
    "AuthorisedKeys",
    "KeyPair",
    "parse_authorised_keys",
    "read_key_pair",
    "valid_public_key",
    "write_key_pair",
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


def valid_public_key(text: str) -> bool:
    """Whether ``text`` is a CURVE key in Z85 (40 characters that decode to 32 bytes)."""
    if len(text) != KEY_LENGTH or not text.isascii():
        return False
    try:
        z85.decode(text)
    except (ValueError, KeyError, TypeError):
        return False
    return True


def write_key_pair(directory: Path, name: str) -> tuple[Path, Path]:
    """Write a new key pair as ``NAME.secret`` (mode 600) and ``NAME.public`` in
    ``directory``; return both paths. Refuses (``FileExistsError``) to overwrite either
    file: replacing a key pair is a rotation, done by writing a new name."""
    if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ValueError(f"key name {name!r}: use letters, digits, '-', '_' and '.'")
    public, secret = _new_key_pair()
    secret_path = directory / f"{name}.secret"
    public_path = directory / f"{name}.public"
    if public_path.exists():
        raise FileExistsError(f"{public_path} exists: choose another name to rotate keys")
    descriptor = os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as out:
        out.write(f"public {public}\nsecret {secret}\n")
    public_path.write_text(f"{public} {name}\n", encoding="ascii")
    return secret_path, public_path


def _new_key_pair() -> tuple[str, str]:
    """A fresh key pair whose public key does not start with ``#`` (which the
    authorised-keys file reads as a comment)."""
    while True:
        public, secret = (part.decode("ascii") for part in zmq.curve_keypair())
        if not public.startswith("#"):
            return public, secret


def read_key_pair(path: Path) -> KeyPair:
    """The key pair in a ``.secret`` file; :class:`KeyFileError` naming the file and what
    is wrong when it is missing, readable by others, or not two valid keys that belong
    together."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise KeyFileError(f"key pair file {path}: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        check_private(path, os.fstat(handle.fileno()))
        raw = handle.read(4096)
    fields: dict[str, str] = {}
    for line in raw.decode("ascii", "replace").splitlines():
        label, _, value = line.strip().partition(" ")
        if label in ("public", "secret"):
            fields[label] = value.strip()
    public, secret = fields.get("public", ""), fields.get("secret", "")
    if not (valid_public_key(public) and valid_public_key(secret)):
        raise KeyFileError(
            f"key pair file {path}: expected the lines 'public <key>' and 'secret <key>' "
            "(40 Z85 characters each), as 'switchboard keys generate' writes them"
        )
    if zmq.curve_public(secret.encode()).decode() != public:
        raise KeyFileError(f"key pair file {path}: the public key is not the secret's own")
    return KeyPair(public=public, secret=secret)


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
        keys[z85.decode(key)] = name.strip() or key[:8]
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
