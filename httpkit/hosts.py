"""Which ``Host`` (and ``Origin``) a server answers to, as plain ASGI middleware.

A page in a browser can make the browser send requests to a server on this machine, and
with DNS rebinding (its own name re-pointed at 127.0.0.1) even read the answers: such a
request names the page's host in ``Host``. :class:`HostAllowList` answers a request whose
``Host`` is not allowed 421 ``host_not_allowed``, and one whose ``Origin`` (the page a
browser sends it from) is not allowed 403 ``origin_not_allowed``, before the app sees it.

Allowed, with any port:

* ``localhost`` and every loopback address (``127.0.0.1``, ``[::1]``, ...);
* the address the connection came in on, written as an address (a server bound to
  ``10.0.0.5``, or to ``0.0.0.0`` and reached as ``10.0.0.5``, answers ``Host: 10.0.0.5``):
  an address is never a rebound name;
* the bind host when it is a name, and every name in the ``allowed_hosts`` setting (a
  comma list), which is how a name the server is reached by (``api.example.com``), or an
  address a proxy or NAT forwards from, is allowed.

``*`` in ``allowed_hosts`` turns both checks off. A request without ``Host`` (HTTP/1.0)
or without ``Origin`` (every non-browser client) is not refused for it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from httpkit.limits import Refusals

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ANY_HOST", "AllowedHosts", "HostAllowList", "parse_allowed_hosts"]

#: The ``allowed_hosts`` entry that turns the checks off.
ANY_HOST: Final = "*"
#: A name or address as an ``allowed_hosts`` entry holds it (no port, no scheme).
_ENTRY = re.compile(r"[a-z0-9._-]+|[0-9a-f:.]+")
#: Shown of a refused header's value, at most.
_SHOWN = 100
#: Allowed header values remembered, at most (of Host and of Origin each).
_REMEMBERED = 256


def parse_allowed_hosts(value: str) -> tuple[str, ...] | None:
    """The names of an ``allowed_hosts`` setting (comma-separated, any case, IPv6 with or
    without brackets), lower case; None for ``*`` (any host). :class:`ValueError` naming
    the entry for one that is not a bare name or address (a port, a scheme, a path)."""
    names: list[str] = []
    for entry in (part.strip().lower() for part in value.split(",")):
        if not entry:
            continue
        if entry == ANY_HOST:
            return None
        bare = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
        if not _ENTRY.fullmatch(bare) or (":" in bare and not _is_address(bare)):
            raise ValueError(
                f"allowed_hosts entry {entry!r} is not a host name or address "
                "(give names without a scheme or port)"
            )
        names.append(bare.rstrip("."))
    return tuple(names)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _address(host: bytes | str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an address (an IPv4 address mapped into IPv6, as a dual-stack socket
    reports an IPv4 peer, as the IPv4 one), or None for a name."""
    try:
        address = ipaddress.ip_address(host.decode("ascii") if isinstance(host, bytes) else host)
    except (UnicodeDecodeError, ValueError):
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _same_address(host: bytes, local_address: str) -> bool:
    """Whether ``host`` is an address equal to ``local_address`` (in any spelling)."""
    address = _address(host)
    return address is not None and address == _address(local_address)


def _hostname(value: bytes) -> bytes:
    """The host of a ``Host`` value (``name``, ``name:port``, ``[v6]:port``), lower case,
    without brackets or a trailing dot."""
    value = value.strip().lower()
    if value.startswith(b"["):
        end = value.find(b"]")
        return value[1:end] if end > 0 else value
    return value.partition(b":")[0].rstrip(b".")


def _origin_host(value: bytes) -> bytes | None:
    """The host of an ``Origin`` value (``http://name:port``); None for ``null`` or
    another scheme."""
    scheme, separator, rest = value.strip().lower().partition(b"://")
    if not separator or scheme not in (b"http", b"https"):
        return None
    return _hostname(rest)


class AllowedHosts:
    """The hosts one server answers to (see the module docstring).

    ``names`` are the extra names (:func:`parse_allowed_hosts`; None: any host), and
    ``bind_host`` the address or name the server listens on. ``setting`` names how to
    change the list, for the refusal's message (e.g. ``--allowed-hosts``).
    """

    def __init__(self, names: Iterable[str] | None, *, bind_host: str, setting: str) -> None:
        self.setting = setting
        self.any = names is None
        allowed = {"localhost", *(names or ())}
        bare = bind_host.strip("[]").lower()
        if not _is_address(bare):
            allowed.add(bare.rstrip("."))
        self._names: frozenset[bytes] = frozenset(name.encode() for name in allowed)
        # Raw header values found allowed whatever the connection, so that the usual
        # request costs a set lookup; bounded, so odd values cannot grow them.
        self._passed_hosts: set[bytes] = set()
        self._passed_origins: set[bytes] = set()

    @classmethod
    def from_setting(cls, value: str, *, bind_host: str, setting: str) -> AllowedHosts:
        """The hosts of an ``allowed_hosts`` setting's value; :class:`ValueError` for a
        malformed one."""
        return cls(parse_allowed_hosts(value), bind_host=bind_host, setting=setting)

    def allows(self, host: bytes, local_address: str | None) -> bool:
        """Whether ``host`` (a bare host, as :func:`_hostname` gives it) is allowed on a
        connection that came in on ``local_address``."""
        return self._everywhere(host) or (
            local_address is not None and _same_address(host, local_address)
        )

    def _everywhere(self, host: bytes) -> bool:
        """Allowed on any connection: any host, a listed name or a loopback address."""
        if self.any or host in self._names:
            return True
        address = _address(host)
        return address is not None and address.is_loopback

    def _passes(self, value: bytes, host: bytes | None, passed: set[bytes], scope: Scope) -> bool:
        if host is None:
            return False
        if self._everywhere(host):
            if len(passed) < _REMEMBERED:
                passed.add(value)
            return True
        server = scope.get("server")
        return server is not None and _same_address(host, server[0])

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """``(status, reason, message)`` refusing the request of ``scope``, or None."""
        for name, value in scope["headers"]:
            if name == b"host":
                if value in self._passed_hosts or self._passes(
                    value, _hostname(value), self._passed_hosts, scope
                ):
                    continue
                shown = value.decode("latin-1")[:_SHOWN]
                message = (
                    f"Host {shown!r} is not a name this server answers to; add it to "
                    f"{self.setting} (or * to accept any)"
                )
                return 421, "host_not_allowed", message
            if name == b"origin":
                if value in self._passed_origins or self._passes(
                    value, _origin_host(value), self._passed_origins, scope
                ):
                    continue
                shown = value.decode("latin-1")[:_SHOWN]
                message = (
                    f"requests from pages of Origin {shown!r} are refused; add its host "
                    f"to {self.setting} (or * to accept any)"
                )
                return 403, "origin_not_allowed", message
        return None


class HostAllowList:
    """Refuse, before ``app`` sees it, an HTTP request whose ``Host`` or ``Origin`` the
    ``hosts`` do not allow, in the shape and with the count ``refusals`` give (see the
    module docstring). Other ASGI traffic (lifespan) passes through untouched."""

    def __init__(self, app: ASGIApp, *, hosts: AllowedHosts, refusals: Refusals) -> None:
        self.app = app
        self.hosts = hosts
        self.refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.hosts.refusal(scope)
            if refused is not None:
                status, reason, message = refused
                self.refusals.counted(reason)
                body = self.refusals.body(status, reason, message)
                headers = [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ]
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
