"""The console's actions in a real browser against a real stack: a barrier that times out
names its straggler, a viewer's token sees every action unavailable, a refused token asks
again, and each action of the command catalogue is offered where its scope says (Freeze
GC included). The stack comes from ``test_admin_console.py``.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import pytest

from app.catalogue import COMMANDS
from tests.integration.harness.admin_stack import AdminStack
from tests.integration.harness.console_page import (
    UI_TIMEOUT_MS,
    barrier_answer,
    by_testid,
    console_page,
    live_worker_ids,
    posted,
)
from tests.integration.test_admin_console import stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.integration

__all__ = ["stack"]


class TestConsoleActions:
    def test_a_pause_timing_out_names_the_straggler_as_a_warning(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """With one worker stopped (SIGSTOP), Pause with a 1 s timeout answers 504 and
        the page warns, naming that worker as the straggler, in the live region and in the
        operations list; Continue after it resumes is acknowledged by everyone."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        workers = live_worker_ids(stack)
        straggler = workers[-1]
        with stack.client() as client:
            pid = client.get(f"/api/workers/{straggler}").raise_for_status().json()["pid"]
        with console_page(browser, stack, stack.operator_token) as (page, _):
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            page.get_by_label("Pause mode").select_option("abort")
            page.get_by_label("Timeout (s)").fill("1")
            os.kill(pid, signal.SIGSTOP)
            try:
                with page.expect_response(posted("/api/pause")) as answer:
                    by_testid(page, "pause-button").click()
            finally:
                os.kill(pid, signal.SIGCONT)
            assert answer.value.status == 504, answer.value.text()
            outcome = answer.value.json()
            assert outcome["stragglers"] == [straggler], outcome

            result = by_testid(page, "op-result")
            expect(result).to_have_attribute("data-kind", "warning")
            expect(result).to_contain_text(f"no acknowledgement from {straggler}")
            operation = by_testid(page, f"operation-{outcome['op_id']}")
            expect(operation).to_have_attribute("data-complete", "false")
            expect(operation).to_have_attribute("data-stragglers", straggler)
            expect(operation).to_contain_text(f"No acknowledgement: {straggler}")

            with page.expect_response(posted("/api/continue")) as answer:
                by_testid(page, "continue-button").click()
            barrier_answer(answer.value, workers)
            expect(by_testid(page, "pause-state")).to_have_attribute("data-paused", "false")
            expect(by_testid(page, f"worker-row-{straggler}")).to_have_attribute(
                "data-state", "serving"
            )

    def test_viewer_token_is_refused_actions_and_bad_token_asks_again(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """A viewer token sees the workers with the actions marked unavailable from the
        start (the page asks /api/whoami), and Pause explains why without calling the
        API; an unknown token brings back the labelled token prompt saying 401, and a
        good token typed there connects."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        with console_page(browser, stack, stack.viewer_token) as (page, problems):
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            expect(by_testid(page, "viewer-note")).to_be_visible()
            expect(by_testid(page, "pause-button")).to_have_attribute("aria-disabled", "true")
            posts: list[str] = []
            page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
            # Playwright will not click an aria-disabled button; a keyboard user can press it.
            by_testid(page, "pause-button").focus()
            page.keyboard.press("Enter")
            expect(by_testid(page, "op-result")).to_contain_text("view but not operate")
            assert posts == [], "a viewer's Pause must not call the API"
            expect(by_testid(page, "pause-state")).to_have_attribute("data-paused", "false")

            page.goto(f"{stack.admin_url}/#token=not-a-token")
            expect(by_testid(page, "token-error")).to_contain_text("401")
            expect(by_testid(page, "connection")).to_have_attribute(
                "data-connection", "unauthorized"
            )
            page.get_by_label("Access token", exact=True).fill(stack.operator_token)
            page.get_by_label("Access token", exact=True).press("Enter")
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            expect(by_testid(page, "token-panel")).to_be_hidden()
            assert not problems.errors, problems.errors

    def test_the_catalogues_actions_are_offered_and_freeze_gc_runs(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """Every console action of the catalogue is on the page where its scope says (the
        pause controls, each worker's row, the engine panel); Freeze GC answers 200 and
        says who froze; a viewer sees it unavailable."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        workers = live_worker_ids(stack)
        with console_page(browser, stack, stack.operator_token) as (page, _):
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            for entry in COMMANDS:
                if entry.console is None:
                    continue
                if entry.console.scope == "generation":
                    controls = [page.locator(f'[data-command="{entry.name}"]')]
                elif entry.console.scope == "worker":
                    controls = [by_testid(page, f"{entry.name}-{worker}") for worker in workers]
                else:
                    controls = [by_testid(page, f"{entry.name.replace('_', '-')}-button")]
                for control in controls:
                    expect(control).to_be_visible()
                    expect(control).to_have_text(entry.console.label)
            freeze = by_testid(page, "freeze-gc-button")
            with page.expect_response(posted("/api/freeze_gc")) as answer:
                freeze.click()
            assert answer.value.status == 200, answer.value.text()
            result = by_testid(page, "op-result")
            expect(result).to_have_attribute("data-kind", "ok")
            expect(result).to_contain_text("Freeze GC: frozen tokenizer_router")
        with console_page(browser, stack, stack.viewer_token) as (page, _):
            expect(by_testid(page, "viewer-note")).to_be_visible()
            expect(by_testid(page, "freeze-gc-button")).to_have_attribute("aria-disabled", "true")

    def test_flush_cache_and_update_weights_from_the_engine_panel(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """Flush cache asks first (dismissed: nothing sent; accepted: 200, what the engine
        dropped); Update weights takes its version and mode from the panel's inputs, runs
        the barrier and the panel shows the weights now serving."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        with console_page(browser, stack, stack.operator_token) as (page, problems):
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            posts: list[str] = []
            page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
            page.once("dialog", lambda dialog: dialog.dismiss())
            by_testid(page, "flush-cache-button").click()
            result = by_testid(page, "op-result")
            expect(result).to_contain_text("Flush cache: not done (cancelled).")
            assert not [url for url in posts if url.endswith("/api/flush_cache")]
            page.once("dialog", lambda dialog: dialog.accept())
            with page.expect_response(posted("/api/flush_cache")) as flushed:
                by_testid(page, "flush-cache-button").click()
            assert flushed.value.status == 200, flushed.value.text()
            expect(result).to_have_text("Flush cache: flushed yes; dropped tokens 0.")

            expect(by_testid(page, "update-weights-mode")).to_have_value("retract")
            by_testid(page, "update-weights-version").fill("console-1")
            by_testid(page, "update-weights-mode").select_option("in_place")
            page.once("dialog", lambda dialog: dialog.accept())
            with page.expect_response(posted("/api/update_weights")) as updated:
                by_testid(page, "update-weights-button").click()
            assert updated.value.status == 200, updated.value.text()
            body = updated.value.json()
            assert body["version"] == "console-1" and body["paused"]["mode"] == "in_place"
            expect(result).to_contain_text("Update weights: version console-1")
            expect(by_testid(page, "load-weights")).to_have_text("console-1")
            assert not problems.errors, problems.errors
