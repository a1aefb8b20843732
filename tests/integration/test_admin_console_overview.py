"""What a newcomer following the docs found missing from the console (issue 23, item 5), in
a real browser against a real stack: with the router's whole list of recent operations
the workers table is still on screen, every clock time carries its date and zone, the
stack's throughput and latency chart has its history the moment the page opens (from
``GET /api/history``) and then grows live, and the pause mode offered first is
``retract``, the one that loses nothing. The stack comes from ``test_admin_console.py``;
each test also fails on any page error.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.integration.harness.admin_stack import AdminStack
from tests.integration.harness.console_page import (
    UI_TIMEOUT_MS,
    by_testid,
    console_page,
    live_worker_ids,
    posted,
)
from tests.integration.harness.polling import wait_until
from tests.integration.test_admin_console import stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.integration

__all__ = ["stack"]

#: The router keeps its latest 20 operations; more pairs than that fill its list.
BARRIER_PAIRS = 12
ROUTER_KEEPS = 20
SHOWN_COLLAPSED = 5
#: A clock time as the console writes it: the date, the 24 h time, the zone.
CLOCK = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} (UTC|GMT[+-]\d{1,2}(:\d{2})?|[A-Z]{2,5})")
#: The admin app samples every 5 s and makes its first sample on its second read.
HISTORY_S = 30.0
#: Well under one sampling interval: whatever the chart shows by then came from history.
OPENED_MS = 3000
GENERATE = {"text": "hello", "sampling_params": {"max_new_tokens": 8}}


def fill_operations(stack: AdminStack) -> None:
    """Pause and continue until the router's list of recent operations is full."""
    with stack.client() as ops:
        for _ in range(BARRIER_PAIRS):
            for path, body in (("/api/pause", {"mode": "in_place"}), ("/api/continue", {})):
                answer = ops.post(path, json={**body, "timeout_s": 5})
                assert answer.status_code == 200, answer.text
        status = ops.get("/api/status").raise_for_status().json()
    assert len(status["recent_operations"]) == ROUTER_KEEPS, status["recent_operations"]


def in_viewport(page: Page, testid: str) -> bool:
    """Whether the element's top edge is inside the window, the page not scrolled."""
    box: dict[str, float] = page.evaluate(
        """(id) => { const r = document.querySelector(`[data-testid="${id}"]`)
                         .getBoundingClientRect();
                     return {top: r.top, height: r.height, inner: window.innerHeight,
                             scrolled: window.scrollY}; }""",
        testid,
    )
    return box["scrolled"] == 0 and box["top"] >= 0 and box["top"] + 40 <= box["inner"]


class TestOperationsStayCompact:
    def test_the_workers_stay_on_screen_with_every_recent_operation(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """With the router's 20 recent operations, the page shows the latest 5 and the
        first worker's row is in the window; "Show all 20" lists every one in a box of its
        own and the row stays in the window; pressed again it shows 5."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        fill_operations(stack)
        first = live_worker_ids(stack)[0]
        with console_page(browser, stack, stack.operator_token) as (page, problems):
            operations = by_testid(page, "operations")
            expect(by_testid(page, f"worker-row-{first}")).to_be_visible()
            expect(operations).to_have_attribute("data-total", str(ROUTER_KEEPS))
            expect(operations.locator("li")).to_have_count(SHOWN_COLLAPSED)
            assert in_viewport(page, f"worker-row-{first}")
            toggle = by_testid(page, "operations-toggle")
            expect(toggle).to_have_text(f"Show all {ROUTER_KEEPS}")
            expect(toggle).to_have_attribute("aria-expanded", "false")

            toggle.click()
            expect(operations.locator("li")).to_have_count(ROUTER_KEEPS)
            expect(toggle).to_have_attribute("aria-expanded", "true")
            page.evaluate("window.scrollTo(0, 0)")
            assert in_viewport(page, f"worker-row-{first}")
            scroll = page.evaluate(
                "(() => { const ol = document.querySelector(\"[data-testid='operations']\");"
                " return [ol.scrollHeight, ol.clientHeight]; })()"
            )
            assert scroll[0] > scroll[1], f"the expanded list does not scroll in its box: {scroll}"

            toggle.click()
            expect(operations.locator("li")).to_have_count(SHOWN_COLLAPSED)
            expect(toggle).to_have_text(f"Show all {ROUTER_KEEPS}")
            assert not problems.errors, problems.errors


class TestClockTimes:
    def test_every_clock_time_has_a_date_and_a_zone(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """The pause banner, each operation, each audit record and the chart's range write
        their times as "YYYY-MM-DD HH:MM:SS <zone>", the date the browser's own for it."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        fill_operations(stack)
        with stack.client() as ops:
            newest = max(
                ops.get("/api/status").json()["recent_operations"], key=lambda op: op["seq"]
            )
        with console_page(browser, stack, stack.viewer_token) as (page, problems):
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            expect(by_testid(page, "pause-state")).to_contain_text("Serving since")
            expect(by_testid(page, "audit-count")).not_to_have_text("")
            expect(by_testid(page, "history-range")).not_to_have_text("")
            op_time = by_testid(page, f"operation-{newest['op_id']}").locator(".op-time")
            shown = {
                "pause-state": by_testid(page, "pause-state").text_content() or "",
                "operation": op_time.text_content() or "",
                "audit": page.locator("[data-testid='audit'] .audit-time").first.text_content()
                or "",
                "history-range": by_testid(page, "history-range").text_content() or "",
            }
            local_date = page.evaluate(
                "(t) => new Date(t * 1000).toLocaleDateString('sv-SE')", newest["finished_at"]
            )
            assert not problems.errors, problems.errors
        for where, text in shown.items():
            assert CLOCK.search(text), (where, text)
        assert (shown["operation"] or "").startswith(local_date), (shown, local_date)


def history(stack: AdminStack) -> dict[str, Any]:
    with stack.client(stack.viewer_token) as viewer:
        answer = viewer.get("/api/history")
    assert answer.status_code == 200, answer.text
    page: dict[str, Any] = answer.json()
    return page


class TestStackChart:
    def test_the_chart_has_its_history_when_the_page_opens_then_grows(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """Once the admin app holds samples (tokens generated among them), a page opened
        then draws every one of them within 3 s of loading, less than the 5 s between
        samples, so from the server's history; later samples are appended as they come."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        with httpx.Client(timeout=30.0, trust_env=False) as client:
            for _ in range(6):
                answer = client.post(f"{stack.base_url}/generate", json=GENERATE)
                assert answer.status_code == 200, answer.text

        def ready() -> dict[str, Any] | None:
            page = history(stack)
            busy = any(sample["tokens_per_s"] > 0 for sample in page["samples"])
            return page if len(page["samples"]) >= 2 and busy else None

        held = wait_until(ready, HISTORY_S, "the admin app's history of generated tokens")
        assert held["available"] is True and held["capacity"] == 180, held
        opened = time.monotonic()
        with console_page(browser, stack, stack.viewer_token) as (page, problems):
            held_count = len(held["samples"])
            # One more may have landed between that read and the page's.
            page.wait_for_function(
                """(least) => ["history-requests", "history-tokens"].every((id) =>
                    Number(document.querySelector(`[data-testid="${id}"]`).dataset.points)
                    >= least)""",
                arg=held_count,
                timeout=OPENED_MS,
            )
            assert time.monotonic() - opened < OPENED_MS / 1000 + 2.0  # the page's own load
            served = int(by_testid(page, "history-requests").get_attribute("data-points") or 0)
            assert held_count <= served <= held_count + 1, (served, held_count)
            expect(by_testid(page, "history-tokens-now")).to_contain_text("peak")

            requests = by_testid(page, "history-requests")
            later = wait_until(
                lambda: int(requests.get_attribute("data-points") or 0) > served,
                HISTORY_S,
                "a live sample appended to the chart",
            )
            assert later
            assert not problems.errors, problems.errors


class TestPauseMode:
    def test_the_mode_offered_first_is_retract(self, browser: Browser, stack: AdminStack) -> None:
        """The select opens on retract, not abort, and Pause pressed without choosing
        sends mode retract; the API's own default is still abort."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        with console_page(browser, stack, stack.operator_token) as (page, problems):
            select = by_testid(page, "pause-mode")
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            expect(select).to_have_value("retract")  # filled from the pause command's choices
            with page.expect_response(posted("/api/pause")) as answer:
                by_testid(page, "pause-button").click()
            assert answer.value.status == 200, answer.value.text()
            assert answer.value.request.post_data_json["mode"] == "retract"
            with page.expect_response(posted("/api/continue")) as answer:
                by_testid(page, "continue-button").click()
            assert answer.value.status == 200, answer.value.text()
            assert not problems.errors, problems.errors
        with stack.client() as ops:
            paused = ops.post("/api/pause", json={"timeout_s": 5})
            assert paused.status_code == 200 and paused.json()["mode"] == "abort", paused.text
            assert ops.post("/api/continue", json={"timeout_s": 5}).status_code == 200
