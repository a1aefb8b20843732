"""AdminClient: what it sends, and how each failure becomes an error with an exit status.

The network is replaced by ``httpx.MockTransport``: a handler per test answers, or
raises the transport error being translated.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from switchboard.admin_cli.client import AdminClient, api_error, check_token, check_url
from switchboard.admin_cli.errors import (
    EXIT_FAILED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    AdminCliError,
    ApiError,
    AuthFailed,
    OperationFailed,
    Unreachable,
    UsageProblem,
)

URL = "http://admin.test:8001"
TOKEN = "s3cret-T0ken_value"

Responder = Callable[[httpx.Request], httpx.Response]


def client(responder: Responder, token: str | None = TOKEN, url: str = URL) -> AdminClient:
    """A client whose requests ``responder`` answers."""
    return AdminClient(url, token, 2.0, transport=httpx.MockTransport(responder))


def raising(error: type[httpx.TransportError], text: str = "boom") -> Responder:
    """A responder that fails the way the network would."""

    def respond(request: httpx.Request) -> httpx.Response:
        raise error(text, request=request)

    return respond


def answering(status: int, body: Any = None, *, content: bytes | None = None) -> Responder:
    """A responder giving ``status`` with ``body`` as JSON (or raw ``content``)."""

    def respond(request: httpx.Request) -> httpx.Response:
        if content is not None:
            return httpx.Response(status, content=content)
        return httpx.Response(status, json=body)

    return respond


def failure(responder: Responder, token: str | None = TOKEN) -> AdminCliError:
    """The error a GET answered by ``responder`` raises."""
    with client(responder, token) as admin, pytest.raises(AdminCliError) as caught:
        admin.get("/api/status")
    return caught.value


class TestRequests:
    """What goes over the wire."""

    def test_sends_bearer_token_and_json(self) -> None:
        """The token rides in the Authorization header; bodies are JSON."""
        seen: list[httpx.Request] = []

        def respond(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return httpx.Response(200, json={"ok": True})

        with client(respond) as admin:
            answer = admin.request("POST", "/api/pause", body={"mode": "abort"})
        assert answer.status == 200
        assert answer.body == {"ok": True}
        assert seen[0].headers["Authorization"] == f"Bearer {TOKEN}"
        assert seen[0].url == httpx.URL(f"{URL}/api/pause")
        assert json.loads(seen[0].content) == {"mode": "abort"}

    def test_no_token_no_header(self) -> None:
        """Without a token no Authorization header is sent at all."""
        seen: list[httpx.Request] = []

        def respond(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return httpx.Response(200, json={})

        with client(respond, token=None) as admin:
            admin.get("/api/status")
        assert "Authorization" not in seen[0].headers

    def test_url_prefix_kept(self) -> None:
        """An admin app behind a path prefix is reached under that prefix."""
        seen: list[httpx.URL] = []

        def respond(request: httpx.Request) -> httpx.Response:
            seen.append(request.url)
            return httpx.Response(200, json={})

        with client(respond, url="https://proxy.test/switchboard/") as admin:
            admin.get("/api/load")
        assert seen == [httpx.URL("https://proxy.test/switchboard/api/load")]

    def test_accepted_error_status_is_an_answer(self) -> None:
        """A status the caller accepts (504 for a barrier) comes back as an answer."""
        with client(answering(504, {"complete": False})) as admin:
            answer = admin.request("POST", "/api/pause", accept=(200, 504))
        assert (answer.status, answer.body) == (504, {"complete": False})

    def test_used_outside_with_block(self) -> None:
        """A client not entered refuses to send."""
        with pytest.raises(RuntimeError):
            client(answering(200, {})).get("/api/status")


class TestTransportFailures:
    """Network failures: unreachable is exit 3, a slow answer is exit 1."""

    @pytest.mark.parametrize(
        "error", [httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError]
    )
    def test_unreachable(self, error: type[httpx.TransportError]) -> None:
        """No connection, or no HTTP on it: the app is unavailable (exit 3)."""
        caught = failure(raising(error))
        assert isinstance(caught, Unreachable)
        assert caught.exit_status == EXIT_UNAVAILABLE
        assert caught.message.startswith(f"cannot reach the admin app at {URL}")

    def test_read_timeout_fails_the_operation(self) -> None:
        """Connected but no answer in time: the operation failed (exit 1)."""
        caught = failure(raising(httpx.ReadTimeout))
        assert isinstance(caught, OperationFailed)
        assert caught.exit_status == EXIT_FAILED
        assert caught.message == f"no answer from the admin app at {URL} within 2 s"

    def test_unsupported_protocol_is_usage(self) -> None:
        """A scheme httpx cannot speak is a usage error."""
        assert failure(raising(httpx.UnsupportedProtocol)).exit_status == EXIT_USAGE


class TestErrorAnswers:
    """Error statuses carry the API's own message and code."""

    def test_not_found(self) -> None:
        """404 with the contract's error body: its message and code, exit 1."""
        body = {"error": {"code": "not_found", "message": "no worker 'nope'"}}
        caught = failure(answering(404, body))
        assert isinstance(caught, ApiError)
        assert not isinstance(caught, AuthFailed)
        assert caught.exit_status == EXIT_FAILED
        assert (caught.status, caught.code) == (404, "not_found")
        assert caught.message == "no worker 'nope' (not_found, HTTP 404)"

    @pytest.mark.parametrize("status", [401, 403])
    def test_auth_failures_exit_3(self, status: int) -> None:
        """401 and 403 are auth failures (exit 3) with the API's message."""
        body = {"error": {"code": "forbidden", "message": "operator token required"}}
        caught = failure(answering(status, body))
        assert isinstance(caught, AuthFailed)
        assert caught.exit_status == EXIT_UNAVAILABLE
        assert caught.message.startswith("operator token required")

    def test_401_without_token_says_how(self) -> None:
        """With no token at all the message says where one goes."""
        body = {"error": {"code": "unauthorized", "message": "missing bearer token"}}
        caught = failure(answering(401, body), token=None)
        assert "--token or set SWITCHBOARD_ADMIN_TOKEN" in caught.message

    def test_fastapi_validation_detail(self) -> None:
        """FastAPI's 422 detail list reads as ``loc: msg`` pairs."""
        body = {"detail": [{"loc": ["body", "timeout_s"], "msg": "must be > 0"}]}
        caught = failure(answering(422, body))
        assert caught.message == "body.timeout_s: must be > 0 (HTTP 422)"

    def test_plain_text_error(self) -> None:
        """A proxy's HTML or text error is flattened to one bounded line."""
        caught = failure(answering(502, content=b"<html>\n  Bad\n gateway " + b"x" * 1000))
        assert "\n" not in caught.message
        assert caught.message.startswith("<html> Bad gateway xxx")
        assert len(caught.message) < 400

    def test_empty_error_uses_reason(self) -> None:
        """With no body the HTTP reason phrase is the message."""
        assert failure(answering(500, content=b"")).message == ("Internal Server Error (HTTP 500)")

    def test_multiline_message_is_one_line(self) -> None:
        """A message with newlines is printed on one line."""
        body = {"error": {"code": "conflict", "message": "w0 is\ndraining"}}
        assert failure(answering(409, body)).message == "w0 is draining (conflict, HTTP 409)"

    def test_ok_without_json(self) -> None:
        """A 200 that is not JSON is not the admin app: exit 1, with a hint."""
        caught = failure(answering(200, content=b"<html>console</html>"))
        assert caught.exit_status == EXIT_FAILED
        assert "is --url the admin app?" in caught.message

    def test_api_error_odd_bodies(self) -> None:
        """Bodies of any shape give some message."""
        assert api_error(418, None, reason="I'm a teapot").message == "I'm a teapot (HTTP 418)"
        assert api_error(400, {"error": "flat"}).message == "request failed (HTTP 400)"
        assert api_error(400, ["x"]).message == "request failed (HTTP 400)"


class TestTokenNeverShown:
    """No error message repeats the token, whatever went wrong."""

    @pytest.mark.parametrize(
        "responder",
        [
            raising(httpx.ConnectError),
            raising(httpx.ReadTimeout),
            answering(401, {"error": {"code": "unauthorized", "message": "bad token"}}),
            answering(403, {"detail": "Forbidden"}),
            answering(200, content=b"not json"),
        ],
    )
    def test_absent_from_messages(self, responder: Responder) -> None:
        """The message and the whole exception chain leave the token out."""
        caught = failure(responder)
        chain: list[BaseException] = [caught]
        while chain[-1].__cause__ is not None:
            chain.append(chain[-1].__cause__)
        assert all(TOKEN not in str(exc) for exc in chain)


class TestChecks:
    """URL and token are checked before any request."""

    @pytest.mark.parametrize(
        ("url", "checked"),
        [
            ("http://127.0.0.1:8001", "http://127.0.0.1:8001"),
            ("http://127.0.0.1:8001/", "http://127.0.0.1:8001"),
            ("https://admin.example/sb/", "https://admin.example/sb"),
            ("http://[::1]:8001", "http://[::1]:8001"),
        ],
    )
    def test_good_urls(self, url: str, checked: str) -> None:
        """http and https URLs, with a port or a prefix, lose only a trailing slash."""
        assert check_url(url) == checked

    @pytest.mark.parametrize(
        "url",
        ["127.0.0.1:8001", "ftp://host", "http://", "http://[::1", "http://h/?q=1", "", "x"],
    )
    def test_bad_urls(self, url: str) -> None:
        """Anything but an http(s) URL with a host is a usage error."""
        with pytest.raises(UsageProblem) as caught:
            check_url(url)
        assert caught.value.exit_status == EXIT_USAGE

    @pytest.mark.parametrize("token", ["two words", "tab\there", "line\nbreak", "caf\u00e9"])
    def test_bad_tokens(self, token: str) -> None:
        """A token no header can carry is refused without repeating it."""
        with pytest.raises(UsageProblem) as caught:
            check_token(token)
        assert token not in caught.value.message

    def test_good_tokens(self) -> None:
        """URL-safe tokens, and none at all, pass."""
        assert check_token("abc-_~+/=.XYZ09") == "abc-_~+/=.XYZ09"
        assert check_token(None) is None
