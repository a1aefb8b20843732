"""The admin app's request body limit (``max_body_bytes``, 1 MiB by default): a body over
it, declared or chunked, is answered 413 in the app's error shape before the app reads it.
The real ``create_app`` is served by uvicorn (httptools) on a loopback port, over the
routers' canned control sockets (the ``routers`` fixture)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from app.main import create_app
from app.settings import AdminSettings
from tests.unit.httpkit.served import WAIT_S, served

TOKEN = "opstoken"
#: Over the worker's 16 MiB limit, as the fault suite sends.
OVERSIZED = 17 * 1024 * 1024
DEFAULT_LIMIT = 1024 * 1024


def settings(routers: tuple[str, str], **given: int) -> AdminSettings:
    """Settings over the canned routers, one operator token, and ``given``."""
    return AdminSettings(
        control_endpoint=routers[0],
        operator_tokens=f"ops:{TOKEN}",  # type: ignore[arg-type]
        **given,  # type: ignore[arg-type]
    )


def chunked(data: bytes, size: int = 1 << 20) -> Iterator[bytes]:
    """``data`` in pieces, so httpx sends it chunked (no Content-Length)."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def sized_body(size: int) -> bytes:
    """A JSON body of exactly ``size`` bytes: a continue's, with an unknown ``pad`` field."""
    bare = len(json.dumps({"timeout_s": 2, "pad": ""}))
    body = json.dumps({"timeout_s": 2, "pad": "p" * (size - bare)}).encode()
    assert len(body) == size
    return body


@pytest.fixture
def client(routers: tuple[str, str]) -> Iterator[httpx.Client]:
    """A client (an operator's token) of the admin app with its default limit."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with (
        served(create_app(settings(routers))) as url,
        httpx.Client(base_url=url, headers=headers, timeout=WAIT_S) as client,
    ):
        yield client


def assert_refused(answer: httpx.Response, limit: int) -> None:
    """``answer`` is the app's 413: its one error shape, naming the limit."""
    assert answer.status_code == 413
    assert answer.json() == {
        "error": {"code": "body_too_large", "message": f"request body exceeds {limit} bytes"}
    }


class TestAdminBodyLimit:
    """Bodies over max_body_bytes are 413 on every endpoint, declared or chunked."""

    @pytest.mark.parametrize("path", ["/api/pause", "/api/continue"])
    def test_declared_oversized_body_is_413(self, client: httpx.Client, path: str) -> None:
        """A 17 MiB body with its Content-Length: 413, the app's shape, 1 MiB named."""
        body = b'{"text": "' + b"a" * OVERSIZED + b'"}'
        assert_refused(client.post(path, content=body), DEFAULT_LIMIT)

    @pytest.mark.parametrize("path", ["/api/pause", "/api/continue"])
    def test_chunked_oversized_body_is_413(self, client: httpx.Client, path: str) -> None:
        """A 17 MiB chunked body: 413, not the 400 of a body read whole and parsed."""
        body = b'{"text": "' + b"a" * OVERSIZED + b'"}'
        answer = client.post(path, content=chunked(body))
        assert "content-length" not in answer.request.headers
        assert_refused(answer, DEFAULT_LIMIT)

    def test_token_check_comes_before_the_limit(self, client: httpx.Client) -> None:
        """Without a token, an oversized body is refused unread by the token check (401,
        decided from the headers alone), which comes before the limit."""
        answer = client.post(
            "/api/pause", content=b"x" * (OVERSIZED), headers={"Authorization": ""}
        )
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "unauthorized"

    def test_body_within_the_limit_is_read(self, client: httpx.Client) -> None:
        """A chunked body under the limit reaches validation: 400 naming its unknown field."""
        body = json.dumps({"mode": "in_place", "no_such_field": "a" * 1000}).encode()
        answer = client.post("/api/pause", content=chunked(body, 100))
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["code"] == "bad_request" and "no_such_field" in error["message"]

    def test_large_malformed_body_is_400(self, client: httpx.Client) -> None:
        """A 200 KB, 100,000-deep nesting, under the default limit, is answered 400 for
        what is wrong with it (the fault suite's case), not 413."""
        body = b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        answer = client.post("/api/pause", content=body)
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "bad_request"

    def test_the_limit_is_the_setting(self, routers: tuple[str, str]) -> None:
        """With max_body_bytes 100, 101 bytes are refused (either way) and 100 are read."""
        app = create_app(settings(routers, max_body_bytes=100))
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        with (
            served(app) as url,
            httpx.Client(base_url=url, headers=headers, timeout=WAIT_S) as client,
        ):
            over, exact = sized_body(101), sized_body(100)
            assert_refused(client.post("/api/continue", content=over), 100)
            assert_refused(client.post("/api/continue", content=chunked(over, 10)), 100)
            within = client.post("/api/continue", content=chunked(exact, 10))
            assert within.status_code == 400
            assert "pad" in within.json()["error"]["message"]


class TestMaxBodyBytesSetting:
    """AdminSettings.max_body_bytes: 1 MiB by default, from the environment, not negative."""

    def test_default_and_environment(
        self, routers: tuple[str, str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """1 MiB unless SWITCHBOARD_ADMIN_MAX_BODY_BYTES says otherwise."""
        assert settings(routers).max_body_bytes == DEFAULT_LIMIT
        monkeypatch.setenv("SWITCHBOARD_ADMIN_MAX_BODY_BYTES", "1024")
        assert settings(routers).max_body_bytes == 1024

    def test_negative_is_refused(self, routers: tuple[str, str]) -> None:
        """A negative limit fails validation, naming the field."""
        with pytest.raises(ValueError, match="max_body_bytes"):
            settings(routers, max_body_bytes=-1)

    def test_described_in_the_schema(self, routers: tuple[str, str]) -> None:
        """The app's OpenAPI description names the limit and its variable."""
        description = create_app(settings(routers)).openapi()["info"]["description"]
        assert "413" in description and "SWITCHBOARD_ADMIN_MAX_BODY_BYTES" in description
