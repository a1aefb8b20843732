"""What a ``serve`` block's ``probe=`` waits for: parsing, and asking once.

A probe list is comma-separated; with ``servers=each`` it may be one list per server
line, the lists separated by ``|`` (one list alone is every line's). A probe is

* ``http(s)://URL``: a 200 answer (``URL~TEXT``: a 200 whose body holds ``TEXT``);
* ``tcp:HOST:PORT``: a TCP connection accepted;
* ``ipc:PATH``: a connection accepted on the Unix socket at ``PATH`` (a ZeroMQ ``ipc://``
  endpoint bound there);
* ``out:TEXT``: the servers' output (stdout and stderr) holding ``TEXT``.

:func:`answers` asks once and says whether the probe is satisfied; callers poll it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

__all__ = ["answers", "probe_groups"]


def probe_groups(text: str, servers: int) -> list[list[str]]:
    """The probes of each of ``servers`` server lines from a marker's ``probe=`` text;
    ValueError when the groups are neither one nor one per line."""
    groups = [[probe for probe in group.split(",") if probe] for group in text.split("|")]
    if len(groups) == 1:
        return groups * servers
    if len(groups) != servers:
        raise ValueError(
            f"probe= has {len(groups)} '|'-separated lists for {servers} server lines "
            "(give one list, or one per line)"
        )
    return groups


def answers(probe: str, output_path: Path) -> bool:
    """Whether ``probe`` (see the module docstring) is satisfied now; ``output_path`` is
    the file the servers write their output to. ValueError on an unknown kind."""
    if probe.startswith("out:"):
        return probe.removeprefix("out:") in output_path.read_text(errors="replace")
    if probe.startswith("tcp:"):
        host, _, port = probe.removeprefix("tcp:").rpartition(":")
        return _connects(socket.AF_INET, (host, int(port)))
    if probe.startswith("ipc:"):
        return _connects(socket.AF_UNIX, probe.removeprefix("ipc:"))
    if probe.startswith(("http://", "https://")):
        url, _, text = probe.partition("~")
        try:
            response = httpx.get(url, timeout=2.0, trust_env=False)
        except httpx.HTTPError:
            return False
        return response.status_code == 200 and text in response.text
    raise ValueError(f"probe {probe!r}: expected http(s)://, tcp:, ipc: or out:")


def _connects(family: socket.AddressFamily, address: tuple[str, int] | str) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(address)
        except OSError:
            return False
    return True
