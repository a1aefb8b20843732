"""CURVE key pair files: written by ``switchboard keys generate``, read by every process
that crosses hosts (the file formats are :mod:`router_core.curve`'s)."""

from __future__ import annotations

import os
from pathlib import Path

import zmq

from router_core.credentials import KeyFileError, check_private
from router_core.curve import KeyPair, valid_public_key

__all__ = ["read_key_pair", "write_key_pair"]


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
    public_path.chmod(0o644)  # a public key is for sharing, whatever the umask
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
