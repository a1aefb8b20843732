"""Security headers on every response of the real admin app, served by uvicorn over the
canned routers: the console's CSP on every console response (``/static/*`` included),
frame denial, nosniff and no referrer everywhere."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from app.headers import API_CSP, CONSOLE_CSP
from app.main import create_app
from app.settings import AdminSettings
from tests.unit.httpkit.served import WAIT_S, served

OPS = "o" * 32

#: (method, path, expected status): console responses, files and errors alike.
CONSOLE = [
    ("GET", "/", 200),
    ("GET", "/static/index.html", 200),
    ("GET", "/static/console.js", 200),
    ("GET", "/static/console.css", 200),
    ("GET", "/static/favicon.svg", 200),
    ("GET", "/static/no-such-file.js", 404),
    ("HEAD", "/static/console.js", 200),
]
#: Everything else: the API (answers and refusals), probes, metrics, the schema.
OTHER = [
    ("GET", "/api/status", 401),
    ("GET", "/api/whoami", 200),
    ("POST", "/api/pause", 503),
    ("GET", "/healthz", 200),
    ("GET", "/metrics", 200),
    ("GET", "/openapi.json", 200),
    ("GET", "/no/such/path", 404),
]


@pytest.fixture
def app(routers: tuple[str, str]) -> FastAPI:
    """The admin app over the canned routers, one operator token."""
    settings = AdminSettings(
        control_endpoint=routers[0],
        detok_control_endpoint=routers[1],
        operator_tokens=f"ops:{OPS}",  # type: ignore[arg-type]
        control_timeout_s=2.0,
    )
    return create_app(settings)


@pytest.fixture
def client(app: FastAPI) -> Iterator[httpx.Client]:
    """A client of the served app; the operator's token only where a test sends it."""
    with served(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
        yield client


def assert_common(answer: httpx.Response) -> None:
    """The headers every response carries."""
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert len(answer.headers.get_list("content-security-policy")) == 1


class TestSecurityHeaders:
    """Every response gets the headers; console responses the console's CSP."""

    @pytest.mark.parametrize(("method", "path", "status"), CONSOLE)
    def test_console_responses(
        self, client: httpx.Client, method: str, path: str, status: int
    ) -> None:
        """The page, its files and a missing file: the console's CSP, never framed."""
        answer = client.request(method, path)
        assert answer.status_code == status
        assert_common(answer)
        assert answer.headers["content-security-policy"] == CONSOLE_CSP
        assert "frame-ancestors 'none'" in CONSOLE_CSP and "script-src 'self'" in CONSOLE_CSP

    @pytest.mark.parametrize(("method", "path", "status"), OTHER)
    def test_other_responses(
        self, client: httpx.Client, method: str, path: str, status: int
    ) -> None:
        """API answers, refusals, probes and metrics: nosniff, no framing, nothing to load."""
        headers = {"Authorization": f"Bearer {OPS}"} if path != "/api/status" else {}
        answer = client.request(method, path, headers=headers)
        assert answer.status_code == status
        assert_common(answer)
        assert answer.headers["content-security-policy"] == API_CSP

    def test_refusals_before_the_app(self, client: httpx.Client) -> None:
        """The guard's 401 and the body limit's 413 carry the headers too."""
        for answer in (
            client.post("/api/pause"),
            client.post(
                "/api/pause",
                content=b"x" * (2 * 1024 * 1024),
                headers={"Authorization": f"Bearer {OPS}"},
            ),
        ):
            assert answer.status_code in (401, 413)
            assert_common(answer)
            assert answer.headers["content-security-policy"] == API_CSP

    def test_a_500_carries_them(
        self, app: FastAPI, client: httpx.Client, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An exception answered by Starlette's own error handling still gets them."""

        async def broken() -> None:
            raise RuntimeError("boom")

        client.get("/healthz")  # the lifespan has run: the router client exists
        monkeypatch.setattr(app.state.admin.router, "status", broken)
        answer = client.get("/api/status", headers={"Authorization": f"Bearer {OPS}"})
        assert answer.status_code == 500
        assert_common(answer)

    def test_console_keeps_its_cache_control(self, client: httpx.Client) -> None:
        """The console page is revalidated on each load."""
        assert client.get("/").headers["cache-control"] == "no-cache"
