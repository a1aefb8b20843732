"""Driving the console in a browser test: the browser, a page, what it did wrong, and the
operator's keyboard.

:func:`chromium` launches Debian's Chromium (the ``browser`` fixture owns it) and
:func:`console_page` opens the console of a stack in a page of its own, closed on the
way out, failed test or not. :class:`PageProblems` collects a page's uncaught errors and
console errors (a CSP violation is one); :func:`by_testid` finds a control by its
``data-testid``. By key presses only, :func:`tab_to` moves the focus to a control and
checks that its focus ring shows, and :func:`connect_by_keyboard` types a token into the
prompt. :func:`audit_rows` reads the audit trail as the page shows it; :func:`posted`,
:func:`barrier_answer` and :func:`live_worker_ids` are what the tests check it against.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.integration.harness.admin_stack import AdminStack
from tests.integration.harness.polling import missing

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Response

__all__ = [
    "MAX_TABS",
    "UI_TIMEOUT_MS",
    "PageProblems",
    "audit_rows",
    "barrier_answer",
    "by_testid",
    "chromium",
    "connect_by_keyboard",
    "console_page",
    "live_worker_ids",
    "posted",
    "tab_to",
]

#: Tab presses that reach any control of the page from anywhere (it has about 30).
MAX_TABS = 80
#: Playwright's wait for anything the page should show (events arrive within a second).
UI_TIMEOUT_MS = 10_000
CHROMIUM = Path("/usr/bin/chromium")
#: See TOOLCHAIN.md: Debian's chromium runs without ``playwright install``.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-default-browser-check",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, closed on the way out; a missing chromium or playwright
    fails under CI=true (skips elsewhere)."""
    if not CHROMIUM.exists():
        missing(f"Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the playwright package (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class PageProblems:
    """Uncaught errors and console errors of a page; a test fails if there are any."""

    errors: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("console", self.console_message)

    def console_message(self, message: Any) -> None:
        # Chromium logs every 4xx answer as "Failed to load resource"; the tests expect some.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.errors.append(f"console.error: {message.text}")


def by_testid(page: Page, name: str) -> Any:
    return page.get_by_test_id(name)


def tab_to(page: Page, testid: str) -> None:
    """Press Tab until the control ``testid`` has the focus, and check its focus ring."""
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement?.dataset?.testid ?? ''") == testid:
            ring = page.evaluate(
                "(() => { const s = getComputedStyle(document.activeElement);"
                " return [s.outlineStyle, parseFloat(s.outlineWidth)]; })()"
            )
            assert ring[0] != "none" and ring[1] >= 2, (testid, ring)
            return
    pytest.fail(f"{MAX_TABS} presses of Tab never reached {testid}")


def connect_by_keyboard(page: Page, token: str) -> None:
    """Type ``token`` into the prompt of a console opened without one, which has the focus."""
    from playwright.sync_api import expect

    expect(by_testid(page, "token-input")).to_be_focused()
    page.keyboard.type(token)
    page.keyboard.press("Enter")
    expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")


@contextmanager
def console_page(
    browser: Browser, stack: AdminStack, token: str | None = None, *, width: int = 1280
) -> Iterator[tuple[Page, PageProblems]]:
    """A new page (in a browser context of its own) at ``stack``'s console, ``width`` px
    wide, and its :class:`PageProblems`, watched from before it loads.

    With ``token`` the console is opened with it in the URL fragment; without, it shows
    the token prompt. The page and its context are closed on the way out, the test failed
    or not. What the page must do, and that ``problems.errors`` is empty, the test says.
    """
    problems = PageProblems()
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        problems.watch(page)
        page.goto(f"{stack.admin_url}/" + (f"#token={token}" if token is not None else ""))
        yield page, problems
    finally:
        page.close()


def posted(path: str) -> Any:
    """A predicate for ``page.expect_response``: the console's POST to ``path``."""
    return lambda response: (
        response.request.method == "POST" and httpx.URL(response.url).path == path
    )


def live_worker_ids(stack: AdminStack) -> list[str]:
    """The ids of the stack's workers that are not dead, sorted."""
    with stack.client() as client:
        workers = client.get("/api/workers").raise_for_status().json()["workers"]
    return sorted(worker["id"] for worker in workers if worker["state"] != "dead")


def barrier_answer(response: Response, workers: list[str]) -> dict[str, Any]:
    """The console's POST was answered 200, acknowledged by the engine and each worker."""
    assert response.status == 200, (response.status, response.text())
    outcome: dict[str, Any] = response.json()
    assert outcome["complete"] is True and outcome["stragglers"] == [], outcome
    assert sorted(outcome["acked"]) == sorted(["engine", *workers]), outcome
    return outcome


def audit_rows(page: Page) -> list[dict[str, Any]]:
    """The audit trail's rows as the page shows them, top to bottom."""
    rows: list[dict[str, Any]] = page.evaluate(
        """[...document.querySelectorAll("[data-testid='audit'] tbody tr")].map((tr) => ({
            seq: Number(tr.dataset.seq), who: tr.dataset.who, action: tr.dataset.action,
            result: tr.dataset.result, cells: [...tr.cells].map((td) => td.textContent)}))"""
    )
    return rows
