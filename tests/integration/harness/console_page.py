"""Driving the console in a browser test: what a page did wrong, and the operator's keyboard.

:class:`PageProblems` collects a page's uncaught errors and console errors (a CSP
violation is one); :func:`by_testid` finds a control by its ``data-testid``. By key
presses only, :func:`tab_to` moves the focus to a control and checks that its focus ring
shows, and :func:`connect_by_keyboard` types a token into the prompt. :func:`audit_rows`
reads the audit trail as the page shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from tests.integration.harness.admin_stack import AdminStack

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = [
    "MAX_TABS",
    "PageProblems",
    "audit_rows",
    "by_testid",
    "connect_by_keyboard",
    "tab_to",
    "watched",
]

#: Tab presses that reach any control of the page from anywhere (it has about 30).
MAX_TABS = 80


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


def connect_by_keyboard(page: Page, stack: AdminStack, token: str) -> None:
    """Open the console without a token and type one into the prompt, which has the focus."""
    from playwright.sync_api import expect

    page.goto(f"{stack.admin_url}/")
    expect(by_testid(page, "token-input")).to_be_focused()
    page.keyboard.type(token)
    page.keyboard.press("Enter")
    expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")


def watched(browser: Browser) -> tuple[Page, PageProblems]:
    problems = PageProblems()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems.watch(page)
    return page, problems


def audit_rows(page: Page) -> list[dict[str, Any]]:
    """The audit trail's rows as the page shows them, top to bottom."""
    rows: list[dict[str, Any]] = page.evaluate(
        """[...document.querySelectorAll("[data-testid='audit'] tbody tr")].map((tr) => ({
            seq: Number(tr.dataset.seq), who: tr.dataset.who, action: tr.dataset.action,
            result: tr.dataset.result, cells: [...tr.cells].map((td) => td.textContent)}))"""
    )
    return rows
