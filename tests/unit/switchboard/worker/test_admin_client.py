"""The worker's client of the admin app: what it forwards, and how each failure is answered.

The admin app is a 40-line stand-in behind httpx's mock transport; the failures of a real
one (down, refusing a token) are driven for real by ``tests/integration/test_sglang_operator.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from switchboard.worker.admin_client import AdminClient, AdminRefusal
from switchboard.worker.settings import _check_admin_url

URL = "http://admin.test:8001"
OPERATION = {"op_id": "1-1", "action": "pause", "complete": True, "acked": ["engine", "w0"]}


def answering(
    status: int, body: Any = None, seen: list[httpx.Request] | None = None, **headers: str
) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, json=body, headers=headers)

    return httpx.MockTransport(answer)


def failing(error: Callable[[httpx.Request], Exception]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        raise error(request)

    return httpx.MockTransport(answer)


def refusal(client: AdminClient, authorization: str | None = "Bearer t") -> AdminRefusal:
    with pytest.raises(AdminRefusal) as caught:
        asyncio.run(client.forward("/pause_generation", b"{}", authorization, wait_s=1.0))
    return caught.value


class TestForwarding:
    """A command goes to the admin app as the caller sent it."""

    def test_the_callers_header_and_body_are_forwarded(self) -> None:
        """The body goes as it came, as JSON; Authorization is the caller's, untouched."""
        seen: list[httpx.Request] = []
        client = AdminClient(URL + "/", transport=answering(200, OPERATION, seen))
        body = b'{"mode": "in_place", "rid": null}'
        answer = asyncio.run(client.forward("/pause_generation", body, "Bearer abc", wait_s=1.0))
        assert answer == OPERATION
        (request,) = seen
        assert (request.method, str(request.url)) == ("POST", f"{URL}/pause_generation")
        assert request.headers["authorization"] == "Bearer abc"
        assert request.headers["content-type"] == "application/json"
        assert request.read() == body

    def test_no_header_is_forwarded_for_the_admin_app_to_refuse(self) -> None:
        """Without Authorization the admin app is still asked (it audits the refusal);
        its 401 is one naming the admin URL and where an operator token is."""
        seen: list[httpx.Request] = []
        body = {"error": {"code": "unauthorized", "message": "send Authorization: Bearer <token>"}}
        refused = refusal(AdminClient(URL, transport=answering(401, body, seen)), None)
        assert (refused.status, refused.kind, refused.reason) == (
            401,
            "authentication_error",
            "unauthorized",
        )
        assert URL in refused.message and "#token=" in refused.message
        assert "--api-key" in refused.message
        assert refused.headers == {"WWW-Authenticate": "Bearer"}
        (request,) = seen
        assert "authorization" not in request.headers

    def test_no_admin_url_is_a_503(self) -> None:
        """A worker started without --admin-url says so, and sends nothing."""
        refused = refusal(AdminClient(""))
        assert (refused.status, refused.reason) == (503, "admin_not_configured")
        assert "--admin-url" in refused.message


class TestAnswers:
    """Each admin answer becomes the worker's."""

    def test_an_unknown_token(self) -> None:
        """The admin app's 401 is a 401 naming its URL and its reason."""
        body = {"error": {"code": "unauthorized", "message": "unknown token"}}
        refused = refusal(AdminClient(URL, transport=answering(401, body)))
        assert refused.status == 401 and refused.kind == "authentication_error"
        assert URL in refused.message and "unknown token" in refused.message

    def test_a_viewers_token(self) -> None:
        """A 403 keeps the admin app's sentence."""
        said = "grafana is a viewer; this needs an operator"
        body = {"error": {"code": "forbidden", "message": said}}
        refused = refusal(AdminClient(URL, transport=answering(403, body)))
        assert (refused.status, refused.kind) == (403, "permission_error")
        assert refused.message == f"the admin app at {URL}: {said}"

    def test_a_barrier_timeout_keeps_the_operation(self) -> None:
        """A 504 is a 504 with the operation (its stragglers) beside the message."""
        body = {**OPERATION, "complete": False, "stragglers": ["w1"]}
        body["error"] = {"code": "timeout", "message": "pause not acknowledged within 1 s by: w1"}
        refused = refusal(AdminClient(URL, transport=answering(504, body)))
        assert (refused.status, refused.kind, refused.reason) == (504, "timeout", "barrier_timeout")
        assert refused.extra["operation"]["stragglers"] == ["w1"]
        assert "error" not in refused.extra["operation"]

    def test_bad_arguments_and_an_absent_router(self) -> None:
        """A 400 keeps its status and message; the admin app's 503 its Retry-After."""
        bad = {"error": {"code": "bad_request", "message": "abort: give a rid, or abort_all true"}}
        refused = refusal(AdminClient(URL, transport=answering(400, bad)))
        assert (refused.status, refused.message) == (400, bad["error"]["message"])
        gone = {"error": {"code": "router_unavailable", "message": "the router does not answer"}}
        transport = answering(503, gone, **{"Retry-After": "1"})
        refused = refusal(AdminClient(URL, transport=transport))
        assert refused.status == 503 and refused.headers == {"Retry-After": "1"}

    def test_anything_else_is_a_bad_gateway(self) -> None:
        """A status the worker does not map, or a body not in the app's shape, is a 502."""
        refused = refusal(AdminClient(URL, transport=answering(500, ["x"])))
        assert (refused.status, refused.reason) == (502, "admin_error")
        assert "answered 500" in refused.message


class TestUnreachable:
    """An admin app that is down or silent is a 503 naming it, within a bound."""

    @pytest.mark.parametrize(
        "error",
        [
            lambda request: httpx.ConnectError("Connection refused", request=request),
            lambda request: httpx.ReadTimeout("timed out", request=request),
        ],
        ids=["down", "silent"],
    )
    def test_down_or_silent(self, error: Callable[[httpx.Request], Exception]) -> None:
        """Both are 503 admin_unavailable with Retry-After, naming the URL."""
        refused = refusal(AdminClient(URL, transport=failing(error)))
        assert (refused.status, refused.reason) == (503, "admin_unavailable")
        assert refused.message.startswith(f"the admin app at {URL} ")
        assert refused.headers == {"Retry-After": "1"}

    def test_a_closed_port_is_answered_at_once(self) -> None:
        """A real connection to a port nobody listens on fails fast."""
        refused = refusal(AdminClient("http://127.0.0.1:9"))
        assert refused.status == 503 and "does not answer (ConnectError" in refused.message


class TestAdminUrlSetting:
    """--admin-url takes an http(s) URL, never one carrying credentials."""

    @pytest.mark.parametrize(
        "url", ["", "http://127.0.0.1:8001", "https://admin.example", "http://h:1/prefix"]
    )
    def test_accepted(self, url: str) -> None:
        """Empty (none), a host and port, a proxy's prefix."""
        _check_admin_url(url)

    @pytest.mark.parametrize(
        "url", ["127.0.0.1:8001", "ftp://h", "http://", "http://u:p@h", "http://h/?q=1"]
    )
    def test_refused(self, url: str) -> None:
        """No scheme, another scheme, no host, credentials or a query."""
        with pytest.raises(ValueError, match="admin_url"):
            _check_admin_url(url)
