"""What the kernel says about a stack's processes: roles, memory, open files, connections.

The supervisor runs every child as ``python -m switchboard.cli <role> ...``; a child's
role name is the one the supervisor logs (``router``, ``detok-router``, ``engine``,
``admin``, ``detokenizer-<index>``, ``worker-<id>``), read from its command line by the
pure :func:`role_name`. The rest reads ``/proc`` through psutil, and treats a zombie as
gone: it runs nothing and holds no socket.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence

import psutil

__all__ = [
    "alive",
    "children_by_role",
    "fd_total",
    "role_name",
    "rss_total",
    "server_ports",
]

_SIMPLE_ROLES = frozenset({"router", "detok-router", "engine", "admin"})


def _flag(argv: Sequence[str], name: str) -> str | None:
    for position, word in enumerate(argv[:-1]):
        if word == name:
            return argv[position + 1]
    return None


def role_name(argv: Sequence[str]) -> str | None:
    """The supervisor's name for the child whose command line is ``argv``, or None."""
    try:
        start = list(argv).index("switchboard.cli")
    except ValueError:
        return None
    if start + 1 >= len(argv):
        return None
    role = argv[start + 1]
    if role in _SIMPLE_ROLES:
        return role
    if role == "detokenizer":
        index = _flag(argv, "--index")
        return None if index is None else f"detokenizer-{index}"
    if role == "worker":
        worker_id = _flag(argv, "--worker-id")
        return None if worker_id is None else f"worker-{worker_id}"
    return None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def children_by_role(supervisor_pid: int) -> dict[str, int]:
    """Role name -> pid of every live child of the supervisor."""
    found: dict[str, int] = {}
    try:
        children = psutil.Process(supervisor_pid).children(recursive=False)
    except psutil.NoSuchProcess:
        return found
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            name = role_name(child.cmdline())
            if name is not None:
                found[name] = child.pid
    return found


def rss_total(pids: Iterable[int]) -> int:
    """Resident memory of ``pids`` together, in bytes (gone ones count 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            total += psutil.Process(pid).memory_info().rss
    return total


def fd_total(pids: Iterable[int]) -> int:
    """Open file descriptors of ``pids`` together (gone ones count 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            total += psutil.Process(pid).num_fds()
    return total


def server_ports(pid: int, port: int) -> set[int]:
    """The client ports of the TCP connections that ``pid`` accepted on ``port``."""
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp4")
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return set()
    return {
        conn.raddr.port
        for conn in connections
        if conn.laddr and conn.laddr.port == port and conn.raddr
    }
