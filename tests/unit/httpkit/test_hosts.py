"""The Host allow-list (``httpkit.hosts``): parsing the setting, which hosts and origins
pass, and the middleware's refusals, driven as plain ASGI without a server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from httpkit.hosts import AllowedHosts, HostAllowList, parse_allowed_hosts
from httpkit.limits import Refusals


def scope(*headers: tuple[bytes, bytes], server: tuple[str, int] = ("127.0.0.1", 8000)) -> Any:
    return {"type": "http", "headers": list(headers), "server": server}


def hosts(names: str = "", bind_host: str = "127.0.0.1") -> AllowedHosts:
    return AllowedHosts.from_setting(names, bind_host=bind_host, setting="--allowed-hosts")


class TestParseAllowedHosts:
    """parse_allowed_hosts: bare names and addresses, lower case; * is any."""

    def test_names_are_split_trimmed_and_lowered(self) -> None:
        """A comma list gives its names, trimmed, lower case, brackets and a trailing
        dot dropped, empty entries skipped."""
        parsed = parse_allowed_hosts(" API.example.com, [::1],10.0.0.5,,host. ")
        assert parsed == ("api.example.com", "::1", "10.0.0.5", "host")

    def test_empty_is_no_names(self) -> None:
        """An empty setting adds no names."""
        assert parse_allowed_hosts("") == ()

    def test_star_is_any_host(self) -> None:
        """``*``, alone or in a list, accepts any host."""
        assert parse_allowed_hosts("*") is None
        assert parse_allowed_hosts("a.example, *") is None

    @pytest.mark.parametrize(
        "entry", ["a.example:80", "http://a.example", "a.example/x", "a b", "[::1]:80", "é.x"]
    )
    def test_an_entry_with_a_port_or_scheme_is_refused(self, entry: str) -> None:
        """An entry that is not a bare name or address is refused, naming it."""
        with pytest.raises(ValueError, match="is not a host name or address"):
            parse_allowed_hosts(f"ok.example,{entry}")


class TestAllowedHosts:
    """AllowedHosts.allows and refusal: loopback, the connection's address, the names."""

    @pytest.mark.parametrize(
        "host",
        [b"localhost", b"127.0.0.1", b"127.0.0.2", b"::1", b"api.example.com"],
    )
    def test_loopback_and_configured_names_pass(self, host: bytes) -> None:
        """localhost, any loopback address and a configured name are allowed."""
        assert hosts("api.example.com").allows(host, "127.0.0.1")

    @pytest.mark.parametrize("host", [b"evil.example", b"10.0.0.9", b"", b"localhost.evil"])
    def test_other_hosts_fail(self, host: bytes) -> None:
        """Another name, another address, an empty host are not allowed."""
        assert not hosts("api.example.com").allows(host, "10.0.0.5")

    def test_the_address_a_request_came_in_on_passes(self) -> None:
        """A wildcard-bound server answers the address each connection arrived on, in any
        spelling of it."""
        allowed = hosts(bind_host="0.0.0.0")
        assert allowed.allows(b"10.0.0.5", "10.0.0.5")
        assert allowed.allows(b"fe80::0:1", "fe80::1")
        assert allowed.allows(b"10.0.0.5", "::ffff:10.0.0.5")  # a dual-stack socket
        assert not allowed.allows(b"10.0.0.6", "10.0.0.5")

    def test_a_bind_host_name_passes(self) -> None:
        """A server bound by name answers that name."""
        assert hosts(bind_host="Box.Example").allows(b"box.example", "10.0.0.5")

    def test_star_passes_anything(self) -> None:
        """With ``*`` every host is allowed."""
        allowed = hosts("*")
        assert allowed.any and allowed.allows(b"evil.example", None)

    @pytest.mark.parametrize(
        "value",
        [b"127.0.0.1:8000", b"LOCALHOST", b"localhost.", b"[::1]:8000", b"api.example.com:443"],
    )
    def test_host_headers_with_ports_and_case_pass(self, value: bytes) -> None:
        """A Host with a port, in upper case, with a trailing dot or bracketed passes."""
        assert hosts("api.example.com").refusal(scope((b"host", value))) is None

    def test_a_request_without_host_or_origin_passes(self) -> None:
        """No Host (HTTP/1.0) and no Origin (not a browser) is not refused for it."""
        assert hosts().refusal(scope((b"accept", b"*/*"))) is None

    def test_another_host_is_421_naming_the_setting(self) -> None:
        """A Host not allowed is 421 host_not_allowed, quoting it and naming the setting."""
        refused = hosts().refusal(scope((b"host", b"evil.example:80")))
        assert refused is not None
        status, reason, message = refused
        assert (status, reason) == (421, "host_not_allowed")
        assert "'evil.example:80'" in message and "--allowed-hosts" in message

    @pytest.mark.parametrize(
        "origin", [b"http://evil.example", b"null", b"chrome-extension://abc", b"file://"]
    )
    def test_an_origin_of_another_site_is_403(self, origin: bytes) -> None:
        """An Origin whose host is not allowed, null or not http(s) is 403."""
        refused = hosts().refusal(scope((b"host", b"127.0.0.1"), (b"origin", origin)))
        assert refused is not None and refused[:2] == (403, "origin_not_allowed")

    @pytest.mark.parametrize(
        "origin", [b"http://localhost:3000", b"https://127.0.0.1", b"http://[::1]:8001"]
    )
    def test_an_origin_on_this_machine_passes(self, origin: bytes) -> None:
        """A page served from this machine (any port) may send requests."""
        assert hosts().refusal(scope((b"host", b"127.0.0.1"), (b"origin", origin))) is None


class TestHostAllowList:
    """HostAllowList answers a refused request itself; others reach the app."""

    def run(self, app_scope: Any) -> tuple[list[dict[str, Any]], list[str], list[str]]:
        sent: list[dict[str, Any]] = []
        reached: list[str] = []
        counted: list[str] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            reached.append(scope["type"])

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        middleware = HostAllowList(app, hosts=hosts(), refusals=Refusals(counted=counted.append))
        asyncio.run(middleware(app_scope, receive, send))
        return sent, reached, counted

    def test_a_refused_host_never_reaches_the_app(self) -> None:
        """The refusal is the Refusals' JSON body with Connection: close, counted once."""
        sent, reached, counted = self.run(scope((b"host", b"evil.example")))
        assert reached == [] and counted == ["host_not_allowed"]
        start, body = sent
        assert start["status"] == 421
        assert (b"connection", b"close") in start["headers"]
        assert json.loads(body["body"])["error"]["code"] == "host_not_allowed"

    def test_an_allowed_host_and_lifespan_reach_the_app(self) -> None:
        """An allowed request and non-HTTP traffic pass through untouched."""
        assert self.run(scope((b"host", b"localhost:1")))[1] == ["http"]
        assert self.run({"type": "lifespan"})[1] == ["lifespan"]
