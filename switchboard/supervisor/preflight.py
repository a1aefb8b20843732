"""Checks run before any child starts, so a bad setting fails at once in one line."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

from router_core.endpoints import RouterEndpoints
from router_core.run_dir import RunDirError, check_private
from switchboard.supervisor.rundir import MAX_IPC_PATH, socket_in_use
from switchboard.supervisor.settings import SettingsError, StackSettings
from switchboard.text import Tokenizer, TokenizerLoadError, load_tokenizer

__all__ = ["check_port_free", "check_run_dir", "check_tokenizer", "preflight"]

#: The longest socket file name the stack puts in the run directory (see ``layout``).
_LONGEST_SOCKET_NAME = "router-engine-events"


def check_port_free(host: str, port: int) -> None:
    """SettingsError unless ``host:port`` can be bound now.

    The probe binds without SO_REUSEPORT, so a server already listening there (even one
    that set SO_REUSEPORT itself) makes it fail; SO_REUSEADDR keeps a port that only has
    connections in TIME_WAIT usable, as it is for the workers.
    """
    try:
        infos = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise SettingsError(f"host {host}: cannot resolve: {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    probe = socket.socket(family, kind, proto)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise SettingsError(f"port {port} on {host} is already in use") from exc
        raise SettingsError(f"cannot bind {host}:{port}: {exc.strerror}") from exc
    finally:
        probe.close()


def check_tokenizer(path: Path | None) -> Tokenizer:
    """Load the tokenizer the children will load; SettingsError if it cannot be.

    Loading the built-in default here also trains and caches it once, before the
    children start, instead of in every child at the same time.
    """
    try:
        return load_tokenizer(path)
    except TokenizerLoadError as exc:
        raise SettingsError(str(exc)) from exc


def check_run_dir(path: Path | None) -> None:
    """SettingsError if a given run directory is not a private directory
    (:func:`router_core.run_dir.check_private`; one that does not exist yet is created
    private later), is too deep for ipc paths, or already holds a running stack."""
    if path is None:
        return
    given = path.expanduser()
    if given.exists() or given.is_symlink():
        try:
            check_private(given)
        except RunDirError as exc:
            raise SettingsError(f"run_dir {path}: {exc}") from None
    resolved = given.resolve()
    longest = len(str(resolved / _LONGEST_SOCKET_NAME))
    if longest > MAX_IPC_PATH:
        raise SettingsError(
            f"run_dir {path}: too long for ipc socket paths ({longest} > {MAX_IPC_PATH} bytes)"
        )
    # A router answering on the control socket there means a stack already runs in it.
    control = RouterEndpoints.in_run_dir(resolved).control.removeprefix("ipc://")
    if socket_in_use(Path(control)):
        raise SettingsError(f"run_dir {path}: another stack is running there")


def preflight(settings: StackSettings) -> Tokenizer:
    """Every check, cheapest first; returns the loaded tokenizer."""
    check_run_dir(settings.run_dir)
    check_port_free(settings.host, settings.port)
    check_port_free(settings.host, settings.admin_port)
    return check_tokenizer(settings.tokenizer)
