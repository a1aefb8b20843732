"""The run directory's one rule: only its owner may enter it.

A stack's run directory holds every ``ipc://`` socket file, the stack key and the state
files. Connecting to a unix socket needs only write permission on its file, so anyone
who can reach the directory could pause the stack through the router's control socket;
the directory is therefore private: owned by the user running the stack, mode 0700
(nothing for group or others), and a real directory, not a symbolic link someone could
point elsewhere. :func:`make_private` creates one so, whatever the umask;
:func:`check_private` refuses one that is not, with :class:`RunDirError`, whose message
is one line saying what is wrong and how to fix it. The supervisor and every standalone
process check their run directory with these two functions. Pure standard library.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

__all__ = ["PRIVATE_MODE", "RunDirError", "check_private", "make_private"]

#: The mode a run directory is created with, and the most it may allow.
PRIVATE_MODE: Final = 0o700


class RunDirError(Exception):
    """A run directory that must not be used; the message says why and what to do
    (the caller names the directory's setting before it)."""


def check_private(path: Path) -> None:
    """:class:`RunDirError` unless ``path`` is a directory (not a symbolic link to one)
    owned by this process's user with no permission for group or others."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise RunDirError("not a directory") from None
    except OSError as exc:
        raise RunDirError(f"cannot be read ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise RunDirError(
            f"is a symbolic link (to {os.readlink(path)}); give a real directory of your own"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise RunDirError("not a directory")
    user = os.geteuid()
    if info.st_uid != user:
        raise RunDirError(
            f"owned by uid {info.st_uid}, not by this user (uid {user}), who could then not "
            "keep others out of it; use a directory of your own"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise RunDirError(
            f"mode {mode:04o} lets other users reach the stack's sockets and key "
            f"(chmod 700 {path}, or use another directory)"
        )


def make_private(path: Path) -> Path:
    """``path``, created (with any missing parents) if it does not exist, mode 0700
    whatever the umask; then checked (:func:`check_private`) whether it was created
    here or already existed. ``OSError`` if it cannot be created."""
    try:
        path.mkdir(mode=PRIVATE_MODE, parents=True)
    except FileExistsError:
        pass  # someone's directory already: the check below decides whether it is usable
    else:
        # mkdir's mode passes through the umask: what it removed the owner gets back
        # (nothing for group or others can have been added).
        os.chmod(path, PRIVATE_MODE)
    check_private(path)
    return path
