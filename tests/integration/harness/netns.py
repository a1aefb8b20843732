"""Two hosts on one machine: network namespaces joined by veth pairs, made by the test.

:func:`two_hosts` makes a ``control`` and a ``workers`` namespace (as root, with
``ip netns``), each with loopback up, joined by one veth pair (the network between the
hosts, which :meth:`TwoHosts.cut` takes down and :meth:`TwoHosts.mend` brings back), and
one more veth pair from this (the test's) namespace to each, so the test reaches both
hosts' HTTP ports while the link between them is down (and each host reaches the test at
:attr:`TwoHosts.here_for_control` or :attr:`TwoHosts.here_for_workers`). Every address is
link-local (169.254.0.0/16), in a /30 of its own, with a third octet chosen so this
machine has no such address yet. Everything is removed at the end (deleting a namespace deletes its
veth ends, and the peers in this namespace with them).

Without root or ``ip`` the test is skipped, and fails under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tests.integration.harness.polling import missing

__all__ = ["TwoHosts", "two_hosts"]

_IP_TIMEOUT_S = 10


def _ip(*arguments: str, namespace: str | None = None) -> None:
    prefix = ["ip", "-n", namespace] if namespace else ["ip"]
    done = subprocess.run(
        [*prefix, *arguments], capture_output=True, text=True, timeout=_IP_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(arguments)}: {done.stderr.strip()}")


@dataclass(frozen=True)
class TwoHosts:
    """The two namespaces and their addresses."""

    control_ns: str
    workers_ns: str
    #: The control host's address on the link between the hosts (where workers connect).
    control_link: str
    workers_link: str
    #: Where this namespace reaches each host.
    control_addr: str
    workers_addr: str
    #: The link's veth end in the control namespace.
    link_device: str
    #: This namespace's own address on its veth pair to each host (where each host
    #: reaches the test, e.g. a receiver it exports to).
    here_for_control: str = ""
    here_for_workers: str = ""

    def launcher(self, namespace: str) -> Sequence[str]:
        """The argv prefix that runs a command on that host."""
        return ("ip", "netns", "exec", namespace)

    def cut(self) -> None:
        """Take the link between the hosts down (both stay reachable from the test)."""
        _ip("link", "set", self.link_device, "down", namespace=self.control_ns)

    def mend(self) -> None:
        """Bring the link between the hosts back."""
        _ip("link", "set", self.link_device, "up", namespace=self.control_ns)


def _taken_octets() -> set[int]:
    done = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"],
        capture_output=True,
        text=True,
        timeout=_IP_TIMEOUT_S,
        check=True,
    )
    taken = set()
    for word in done.stdout.split():
        with contextlib.suppress(ValueError):
            interface = ipaddress.ip_interface(word)
            if interface.ip in ipaddress.ip_network("169.254.0.0/16"):
                taken.add(int(str(interface.ip).split(".")[2]))
    return taken


@contextlib.contextmanager
def two_hosts() -> Iterator[TwoHosts]:
    """Make the two hosts (see the module docstring); remove them at the end."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        missing("root and ip(8), for network namespaces")
    # 169.254.169.x is where clouds keep their metadata service: never near it.
    free = [octet for octet in range(20, 160) if octet not in _taken_octets()]
    third = free[secrets.randbelow(len(free))]
    tag = secrets.token_hex(3)
    control_ns, workers_ns = f"sb-{tag}-ctl", f"sb-{tag}-wrk"
    net = f"169.254.{third}"
    # Three /30s in one /24: .0/30 the link between the hosts, .4/30 and .8/30 the test's.
    pairs = (
        (f"sbl{tag}c", control_ns, f"{net}.1", f"sbl{tag}w", workers_ns, f"{net}.2"),
        (f"sbt{tag}c", None, f"{net}.5", f"sbc{tag}", control_ns, f"{net}.6"),
        (f"sbt{tag}w", None, f"{net}.9", f"sbw{tag}", workers_ns, f"{net}.10"),
    )
    made: list[str] = []
    try:
        for namespace in (control_ns, workers_ns):
            _ip("netns", "add", namespace)
            made.append(namespace)
            _ip("link", "set", "lo", "up", namespace=namespace)
        for left, left_ns, left_addr, right, right_ns, right_addr in pairs:
            _ip("link", "add", left, "type", "veth", "peer", "name", right)
            for device, device_ns, address in (
                (left, left_ns, left_addr),
                (right, right_ns, right_addr),
            ):
                if device_ns is not None:
                    _ip("link", "set", device, "netns", device_ns)
                _ip("addr", "add", f"{address}/30", "dev", device, namespace=device_ns)
                _ip("link", "set", device, "up", namespace=device_ns)
        yield TwoHosts(
            control_ns=control_ns,
            workers_ns=workers_ns,
            control_link=f"{net}.1",
            workers_link=f"{net}.2",
            control_addr=f"{net}.6",
            workers_addr=f"{net}.10",
            link_device=f"sbl{tag}c",
            here_for_control=f"{net}.5",
            here_for_workers=f"{net}.9",
        )
    finally:
        for namespace in made:
            with contextlib.suppress(RuntimeError):
                _ip("netns", "del", namespace)
        for device in (f"sbt{tag}c", f"sbt{tag}w"):
            with contextlib.suppress(RuntimeError):
                _ip("link", "del", device)  # gone already with its peer, normally
