"""What the console gained for the operator (issue 13, point 4), in a real browser against a
real stack: every action by keyboard alone with a visible focus ring, Freeze GC for an
operator and refused for a viewer, the audit trail live, each worker's errors and latency
in the table, and "router unreachable" (since when, why) instead of Live while the router
does not answer. The stack comes from ``test_admin_console.py``; each test also fails on
any page error, a CSP violation included.
"""

from __future__ import annotations

import math
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.integration.harness.admin_stack import AdminStack
from tests.integration.harness.console_page import (
    UI_TIMEOUT_MS,
    audit_rows,
    by_testid,
    connect_by_keyboard,
    console_page,
    live_worker_ids,
    posted,
    tab_to,
)
from tests.integration.harness.polling import wait_until
from tests.integration.test_admin_console import stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.integration

__all__ = ["stack"]

#: The admin app samples the workers' metrics every 5 s; workers flush theirs every 1 s.
STATS_S = 30.0
#: The poller waits control_timeout_s (5 s) for a stopped router before it gives up.
UNREACHABLE_S = 20.0
GENERATE = {"text": "hello", "sampling_params": {"max_new_tokens": 4}}
#: Refused 400 by whichever worker gets it.
BAD_GENERATE = {"text": "hello", "sampling_params": {"max_new_tokens": -1}}


class TestKeyboard:
    def test_every_action_by_keyboard_alone(self, browser: Browser, stack: AdminStack) -> None:
        """With Tab, Enter, Space and arrow keys only: the token prompt connects, the skip
        link reaches the workers, Pause (in_place, timeout typed) and Continue, Drain and
        Undrain, Freeze GC and Forget token each run, every control with its focus ring."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        worker = live_worker_ids(stack)[-1]
        with console_page(browser, stack) as (page, problems):
            connect_by_keyboard(page, stack.operator_token)
            expect(by_testid(page, f"drain-{worker}")).to_have_attribute("aria-disabled", "false")

            tab_to(page, "skip-link")
            page.keyboard.press("Enter")
            expect(page.locator("#workers-heading")).to_be_focused()

            tab_to(page, "pause-mode")
            page.keyboard.press("ArrowDown")
            page.keyboard.press("ArrowDown")
            expect(by_testid(page, "pause-mode")).to_have_value("in_place")
            tab_to(page, "pause-timeout")
            page.keyboard.press("ControlOrMeta+A")
            page.keyboard.type("3")
            tab_to(page, "pause-button")
            with page.expect_response(posted("/api/pause")) as answer:
                page.keyboard.press("Space")
            assert answer.value.status == 200, answer.value.text()
            assert answer.value.request.post_data_json == {"mode": "in_place", "timeout_s": 3}
            expect(by_testid(page, "pause-state")).to_have_attribute("data-paused", "true")

            tab_to(page, "continue-button")
            with page.expect_response(posted("/api/continue")) as answer:
                page.keyboard.press("Enter")
            assert answer.value.status == 200, answer.value.text()
            expect(by_testid(page, "pause-state")).to_have_attribute("data-paused", "false")

            tab_to(page, f"drain-{worker}")
            with page.expect_response(posted(f"/api/workers/{worker}/drain")) as answer:
                page.keyboard.press("Enter")
            assert answer.value.status == 200, answer.value.text()
            row = by_testid(page, f"worker-row-{worker}")
            expect(row).to_have_attribute("data-state", "drained")
            tab_to(page, f"undrain-{worker}")
            with page.expect_response(posted(f"/api/workers/{worker}/undrain")) as answer:
                page.keyboard.press("Space")
            assert answer.value.status == 200, answer.value.text()
            expect(row).to_have_attribute("data-state", "serving")

            tab_to(page, "freeze-gc-button")
            with page.expect_response(posted("/api/freeze_gc")) as answer:
                page.keyboard.press("Enter")
            assert answer.value.status == 200, answer.value.text()
            expect(by_testid(page, "op-result")).to_have_attribute("data-kind", "ok")

            tab_to(page, "sign-out")
            page.keyboard.press("Enter")
            expect(by_testid(page, "token-panel")).to_be_visible()
            expect(by_testid(page, "token-input")).to_be_focused()
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "idle")
            assert not problems.errors, problems.errors


class TestFreezeGc:
    def test_an_operator_freezes_and_a_viewer_is_refused(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """Freeze GC by keyboard: the operator's answer 200 is shown (who froze, who was
        asked); a viewer's press sends nothing and says the token cannot operate."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        with console_page(browser, stack) as (page, problems):
            connect_by_keyboard(page, stack.operator_token)
            tab_to(page, "freeze-gc-button")
            with page.expect_response(posted("/api/freeze_gc")) as answer:
                page.keyboard.press("Enter")
            assert answer.value.status == 200, answer.value.text()
            body = answer.value.json()
            assert "tokenizer_router" in body["frozen"] and body["forwarded_to"], body
            result = by_testid(page, "op-result")
            expect(result).to_have_attribute("data-kind", "ok")
            expect(result).to_have_text(
                f"Freeze GC: frozen {', '.join(body['frozen'])}; "
                f"forwarded to {', '.join(body['forwarded_to'])}."
            )
            assert not problems.errors, problems.errors
        with console_page(browser, stack) as (page, problems):
            connect_by_keyboard(page, stack.viewer_token)
            expect(by_testid(page, "viewer-note")).to_be_visible()
            button = by_testid(page, "freeze-gc-button")
            expect(button).to_have_attribute("aria-disabled", "true")
            posts: list[str] = []
            page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
            tab_to(page, "freeze-gc-button")
            page.keyboard.press("Enter")
            expect(by_testid(page, "op-result")).to_have_text(
                "This token can view but not operate (viewer)."
            )
            assert posts == [], "a viewer's Freeze GC must not call the API"
            assert not problems.errors, problems.errors


class TestAuditTrail:
    def test_mutations_arrive_live_newest_first_with_names_never_tokens(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """A viewer's console shows each mutation as it happens, newest first, with who
        (the token's name), what, on what, the result and status: an operator's drain
        and undrain, a refused undrain (409), a viewer's refused pause (403) and one
        without a known token (401); no token value is on the page; a reload shows the
        same records from GET /api/audit."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        worker = live_worker_ids(stack)[0]
        with console_page(browser, stack) as (page, problems):
            connect_by_keyboard(page, stack.viewer_token)
            with stack.client() as ops, stack.client(stack.viewer_token) as viewer:
                before = ops.get("/api/audit?limit=1").json()["total"]
                assert ops.post(f"/api/workers/{worker}/drain").status_code == 200
                assert ops.post(f"/api/workers/{worker}/undrain").status_code == 200
                assert ops.post(f"/api/workers/{worker}/undrain").status_code == 409
                assert viewer.post("/api/pause", json={"mode": "abort"}).status_code == 403
            stranger = httpx.post(
                f"{stack.admin_url}/api/continue",
                headers={"Authorization": "Bearer not-a-token-of-anyone"},
                trust_env=False,
            )
            assert stranger.status_code == 401
            wanted = [
                (None, "continue", "refused", "401"),
                ("viewer", "pause", "refused", "403"),
                ("ops", "undrain", "refused", "409"),
                ("ops", "undrain", "ok", "200"),
                ("ops", "drain", "ok", "200"),
            ]
            expect(by_testid(page, f"audit-row-{before + 5}")).to_be_visible()
            rows = audit_rows(page)[:5]
            shown = [(r["who"] or None, r["action"], r["result"], r["cells"][5]) for r in rows]
            assert shown == wanted, rows
            assert [r["seq"] for r in rows] == list(range(before + 5, before, -1))
            assert rows[2]["cells"][3] == worker and "conflict" in rows[2]["cells"][6]
            assert rows[0]["cells"][1] == "—"
            text = page.locator("body").inner_text()
            for token in (stack.operator_token, stack.viewer_token, "not-a-token-of-anyone"):
                assert token not in text and token not in page.content()
            page.reload()
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            expect(by_testid(page, f"audit-row-{before + 5}")).to_be_visible()
            assert audit_rows(page)[:5] == rows
            assert not problems.errors, problems.errors


#: Long enough (at the stack's step time) to be running when the engine is killed.
LONG_GENERATE = {"text": "hello", "sampling_params": {"max_new_tokens": 2000}}


def in_flight(stack: AdminStack) -> int:
    """Requests the workers hold, as the admin API lists them."""
    with stack.client() as ops:
        return sum(w.get("inflight") or 0 for w in ops.get("/api/workers").json()["workers"])


def fresh_post(url: str, body: Any) -> int:
    """POST on a new connection (the kernel spreads connections over the workers)."""
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        return client.post(url, json=body, headers={"Connection": "close"}).status_code


class TestWorkerStats:
    def test_errors_and_latency_per_worker_in_the_table(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """Requests in flight when the engine is killed end 503 (lost): those are the
        errors of the workers that held them, and the table shows each worker's errors and
        p50/p95 latency as GET /api/worker_stats computes them from the metrics; the
        figures add up to what the client saw."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        workers = live_worker_ids(stack)
        url = f"{stack.base_url}/generate"
        seen: dict[int, int] = {}
        with ThreadPoolExecutor(len(workers) * 4) as pool:
            lost = [pool.submit(fresh_post, url, LONG_GENERATE) for _ in range(len(workers) * 4)]
            wait_until(lambda: in_flight(stack) >= len(lost), 30.0, "every long request running")
            (engine,) = stack.role_processes("engine")
            engine.kill()
            for future in lost:
                status = future.result(60)
                seen[status] = seen.get(status, 0) + 1
        wait_until(lambda: fresh_post(url, GENERATE) == 200, 60.0, "the engine back")
        seen[200] = seen.get(200, 0) + 1
        for body in (GENERATE, GENERATE, BAD_GENERATE):
            status = fresh_post(url, body)
            seen[status] = seen.get(status, 0) + 1
        assert set(seen) == {200, 400, 503} and seen[400] == 1, seen

        def settled() -> dict[str, Any] | None:
            with stack.client() as ops:
                page = ops.get("/api/worker_stats").json()
            figures = page["workers"].values()
            requests = sum(each["requests"] for each in figures)
            generations = sum(each["generations"] for each in figures)
            done = requests >= sum(seen.values()) and generations >= seen[200]
            return page if done else None

        stats = wait_until(settled, STATS_S, "the sampler to see every generation")
        figures = stats["workers"]
        assert stats["available"] is True
        # This module sends no other serving traffic: the window holds exactly these.
        assert sum(f["requests"] for f in figures.values()) == sum(seen.values()), figures
        assert sum(f["refused"] for f in figures.values()) == seen[400], figures
        # Each 503 is an error of the worker that answered it.
        assert sum(f["errors"] for f in figures.values()) == seen[503], figures
        failing = next(w for w in workers if figures[w]["errors"])
        busy = [w for w in workers if figures[w]["generations"]]
        assert busy and all(figures[w]["latency_p50_s"] > 0 for w in busy), figures

        with console_page(browser, stack, stack.viewer_token) as (page, problems):
            expect(by_testid(page, "stats-window")).to_have_attribute("data-available", "true")
            errors = by_testid(page, f"errors-{failing}")
            expect(errors).not_to_have_attribute("data-errors", "")
            with stack.client() as ops:
                now = ops.get("/api/worker_stats").json()["workers"]
            for worker in workers:
                cell = by_testid(page, f"errors-{worker}")
                expect(cell).to_have_attribute("data-errors", str(now[worker]["errors"]))
                expect(cell).to_have_attribute("data-requests", str(now[worker]["requests"]))
                latency = by_testid(page, f"latency-{worker}")
                if now[worker]["latency_p50_s"] is None:
                    expect(latency).to_have_text("—")
                    continue
                p50 = float(latency.get_attribute("data-p50") or "nan")
                p95 = float(latency.get_attribute("data-p95") or "nan")
                assert math.isclose(p50, now[worker]["latency_p50_s"]), (p50, now[worker])
                assert math.isclose(p95, now[worker]["latency_p95_s"]), (p95, now[worker])
                expect(latency).to_contain_text(" / ")
            expect(errors).to_have_attribute("data-bad", "true")
            expect(by_testid(page, "stats-window")).to_contain_text("from the workers' metrics")
            assert not problems.errors, problems.errors


def router_process(stack: AdminStack) -> int:
    (router,) = stack.role_processes("router")
    return router.pid


class TestRouterUnreachable:
    def test_a_stopped_router_is_shown_unreachable_then_live_again(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """With the tokenizer router stopped (SIGSTOP), a live console turns from Live to
        "Router unreachable since ..." with the admin app's error, and so does one opened
        meanwhile (its stream refused 503); the audit trail and the worker stats still
        answer; once the router runs again, both are Live."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        with console_page(browser, stack) as (live, problems), ExitStack() as later:
            connect_by_keyboard(live, stack.operator_token)
            connection = by_testid(live, "connection")
            pid = router_process(stack)
            stopped_at = time.time()
            os.kill(pid, signal.SIGSTOP)
            try:
                expect(connection).to_have_attribute(
                    "data-connection", "unreachable", timeout=UNREACHABLE_S * 1000
                )
                expect(connection).to_contain_text("Router unreachable since")
                expect(by_testid(live, "connection-detail")).to_contain_text(
                    "The admin app cannot reach the router"
                )
                expect(by_testid(live, "connection-detail")).to_contain_text("did not answer")
                since = float(connection.get_attribute("data-since") or "nan")
                assert stopped_at - 1 <= since <= time.time(), (stopped_at, since)
                expect(live.locator("body")).to_have_attribute("data-stale", "true")

                late, late_problems = later.enter_context(
                    console_page(browser, stack, stack.operator_token)
                )
                late_connection = by_testid(late, "connection")
                expect(late_connection).to_have_attribute(
                    "data-connection", "unreachable", timeout=UNREACHABLE_S * 1000
                )
                expect(by_testid(late, "connection-detail")).to_contain_text(
                    "does not answer the admin app (since"
                )
                with stack.client(timeout=5.0) as ops:
                    assert ops.get("/api/audit").status_code == 200
                    assert ops.get("/api/worker_stats").status_code == 200
            finally:
                os.kill(pid, signal.SIGCONT)
            expect(connection).to_have_attribute(
                "data-connection", "live", timeout=UNREACHABLE_S * 1000
            )
            expect(connection).to_have_text("Live")
            expect(by_testid(live, "connection-detail")).to_be_hidden()
            expect(by_testid(late, "connection")).to_have_attribute(
                "data-connection", "live", timeout=UNREACHABLE_S * 1000
            )
            assert not problems.errors + late_problems.errors, (problems, late_problems)
        # The stack is whole again for whatever runs next.
        wait_until(lambda: len(live_worker_ids(stack)) == 2, UNREACHABLE_S, "both workers back")
