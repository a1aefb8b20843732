"""The worker's ``/docs`` renders its API in a real browser with nothing from elsewhere.

FastAPI's default page loads Swagger UI from a CDN, which a serving host without
Internet access cannot reach. The worker serves the page and Swagger UI 5's files
itself; here Debian's Chromium opens it on a ``switchboard up`` stack, and every request
the page makes must go to the worker's own origin, the OpenAPI 3.1 schema must render
(the generation routes listed, no "Unable to render" error), and the page must log no
error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
import pytest

from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.console_page import UI_TIMEOUT_MS, PageProblems

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.integration

#: Routes the rendered page must list (each an operation block of Swagger UI).
ROUTES = ("/generate", "/v1/chat/completions", "/v1/completions", "/v1/models")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    with admin_stack(tmp_path_factory, workers=1) as running:
        yield running


def test_the_page_and_its_files_come_from_the_worker(stack: AdminStack) -> None:
    """The HTML names only the worker's own files, which it serves, under a policy that
    allows nothing from elsewhere; FastAPI's ReDoc page (also a CDN's) is not served."""
    page = httpx.get(stack.base_url + "/docs", timeout=10.0)
    assert page.status_code == 200, page.text
    assert "cdn." not in page.text and "https://" not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"):
        assert f"/docs/static/{name}" in page.text
        served = httpx.get(f"{stack.base_url}/docs/static/{name}", timeout=10.0)
        assert served.status_code == 200 and len(served.content) > 1000, name
    bundle = httpx.get(stack.base_url + "/docs/static/swagger-ui-bundle.js", timeout=10.0)
    assert "isOAS31" in bundle.text, "Swagger UI before 5 cannot render OpenAPI 3.1"
    assert httpx.get(stack.base_url + "/redoc", timeout=10.0).status_code == 404
    schema = httpx.get(stack.base_url + "/openapi.json", timeout=10.0).json()
    assert schema["openapi"].startswith("3.1")


def test_the_api_renders_in_a_browser_offline(stack: AdminStack, browser: Browser) -> None:
    """Chromium shows every listed route's operation, asked nothing of another origin,
    and logged no error."""
    origin = urlsplit(stack.base_url).netloc
    elsewhere: list[str] = []
    problems = PageProblems()
    page = browser.new_page()
    try:
        problems.watch(page)
        page.on(
            "request",
            lambda request: (
                None
                if urlsplit(request.url).netloc == origin or request.url.startswith("data:")
                else elsewhere.append(request.url)
            ),
        )
        page.goto(stack.base_url + "/docs", wait_until="load", timeout=UI_TIMEOUT_MS)
        page.wait_for_selector(".opblock", timeout=UI_TIMEOUT_MS)
        shown = page.locator(".opblock-summary-path").all_inner_texts()
        for route in ROUTES:
            assert any(text.replace("\u200b", "") == route for text in shown), (route, shown)
        assert page.locator("text=Unable to render this definition").count() == 0
        assert page.locator(".errors-wrapper").count() == 0
    finally:
        page.close()
    assert elsewhere == [], f"the page asked another origin: {elsewhere}"
    assert problems.errors == [], problems.errors
