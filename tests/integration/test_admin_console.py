"""The operator console in a real browser (Debian's Chromium, driven by Playwright) against a
real stack started by ``switchboard up``, the engine stepping every 20 ms.

The console is opened with the operator token in the URL fragment; every change it shows
arrives on ``/api/events``. A pause in place must freeze a streaming ``/generate`` that
started just before it, Continue must let it finish, and a drained worker must reach
``drained`` with ``safe_to_delete``, all seen in the page itself. A straggler, a viewer's
token and the catalogue's actions are in ``test_admin_console_actions.py``, the console's
own modules in ``test_admin_console_modules.py``, what it gained for the operator in
``test_admin_console_operator.py``; they use this module's ``stack`` fixture.

Screenshots go to the test's tmp dir; with ``SWITCHBOARD_TEST_ARTIFACTS`` set the last one
is also copied to ``tests/artifacts/console.png``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.console_page import (
    UI_TIMEOUT_MS,
    barrier_answer,
    by_testid,
    console_page,
    live_worker_ids,
    posted,
)
from tests.integration.harness.polling import REPO_ROOT, wait_until
from tests.integration.harness.sse import StreamThread

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.integration

#: The engine steps every 20 ms, so 64 tokens take about 1.3 s unless paused.
STEP_TIME_S = 0.02
TOKENS = 64
GENERATE = {"text": "hello", "sampling_params": {"max_new_tokens": TOKENS}}
#: The window in which a paused stream must receive nothing; the window is the assertion.
PAUSED_WINDOW_S = 1.0
#: Rows of the last step before the pause may still be on their way after the barrier's
#: acknowledgement (engine -> detokenizer -> worker -> client); they settle first.
SETTLE_S = 0.5
BARRIER_S = 5.0
ARTIFACTS_ENV = "SWITCHBOARD_TEST_ARTIFACTS"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """One ``switchboard up`` with 2 workers for the module, continued before it stops."""
    with admin_stack(tmp_path_factory, workers=2, step_time=STEP_TIME_S) as running:
        try:
            yield running
        finally:
            # A test that failed while paused must not leave the drain at shutdown waiting.
            with running.client() as client:
                client.post("/api/continue", json={"timeout_s": BARRIER_S})


class Screenshots:
    """Numbered screenshots in ``directory``; the last one is the artifact."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.taken: list[Path] = []

    def take(self, page: Page, name: str) -> Path:
        path = self.directory / f"{len(self.taken):02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)
        return path

    @contextmanager
    def recording(self, page: Page) -> Iterator[None]:
        """A screenshot of ``page`` if the block fails; the last one published either way."""
        try:
            yield
        except BaseException:
            self.take(page, "failure")
            raise
        finally:
            self.publish()

    def publish(self) -> None:
        """Copy the last screenshot to tests/artifacts/console.png if the env asks for it."""
        if self.taken and os.environ.get(ARTIFACTS_ENV):
            target = REPO_ROOT / "tests" / "artifacts" / "console.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.taken[-1], target)


class TestOperatorConsole:
    def test_pause_in_place_freezes_a_stream_continue_finishes_it_drain_reaches_safe(
        self, browser: Browser, stack: AdminStack, tmp_path: Path
    ) -> None:
        """From the page alone: every worker is listed; Pause (in_place) answers 200 with
        every acknowledgement, a stream started just before receives nothing for 1 s while
        the page shows paused with the engine and each worker acknowledged; Continue lets
        the stream finish all its tokens; Drain takes a worker to drained and safe to
        delete, Undrain brings it back; the token leaves the URL; the page fits 400 px."""
        from playwright.sync_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)
        shots = Screenshots(tmp_path)
        with (
            console_page(browser, stack, stack.operator_token) as (page, problems),
            shots.recording(page),
        ):
            workers = live_worker_ids(stack)
            assert len(workers) == 2, workers

            # The token moved from the fragment to sessionStorage; the address bar is clean.
            expect(by_testid(page, "connection")).to_have_attribute("data-connection", "live")
            assert stack.operator_token not in page.url
            assert "token" not in page.evaluate("window.location.href")
            assert page.evaluate("Object.values(sessionStorage)") == [stack.operator_token]

            for worker in workers:
                row = by_testid(page, f"worker-row-{worker}")
                expect(row).to_be_visible()
                expect(row).to_have_attribute("data-state", "serving")
            expect(by_testid(page, "pause-state")).to_have_attribute("data-paused", "false")
            shots.take(page, "serving")

            # Labelled controls: the select is found by its label, the buttons by name.
            page.get_by_label("Pause mode").select_option("in_place")
            reading = StreamThread(stack.base_url, GENERATE).start()
            wait_until(reading.started, 15.0, "the stream's first event")
            stream = reading.seen
            assert reading.failure is None and stream.events, (reading.failure, stream.error)
            with page.expect_response(posted("/api/pause"), timeout=UI_TIMEOUT_MS) as answer:
                page.get_by_role("button", name="Pause", exact=True).click()
            pause = barrier_answer(answer.value, workers)
            assert pause["mode"] == "in_place"
            assert not stream.done, (
                f"the stream ended ({stream.completion_tokens} tokens) before the pause "
                "took effect: the premise of this test (a stream in flight) did not hold"
            )

            wait_until(lambda: stream.quiet_for() >= SETTLE_S, 10.0, "the stream to go quiet")
            window_start, seen = time.monotonic(), len(stream.events)
            # During the window: the page shows the pause and who acknowledged it.
            state = by_testid(page, "pause-state")
            expect(state).to_have_attribute("data-paused", "true")
            expect(state).to_have_attribute("data-mode", "in_place")
            expect(state).to_contain_text("Paused (in_place) since")
            operation = by_testid(page, f"operation-{pause['op_id']}")
            expect(operation).to_have_attribute("data-complete", "true")
            expect(operation).to_have_attribute("data-acked", " ".join(pause["acked"]))
            expect(operation).to_contain_text("Acknowledged: " + ", ".join(pause["acked"]))
            result = by_testid(page, "op-result")
            expect(result).to_have_attribute("data-kind", "ok")
            expect(result).to_contain_text("Pause (in_place): acknowledged by engine")
            for worker in workers:
                expect(by_testid(page, f"worker-row-{worker}")).to_have_attribute(
                    "data-state", "paused"
                )
            shots.take(page, "paused")
            rest = window_start + PAUSED_WINDOW_S - time.monotonic()
            if rest > 0:
                page.wait_for_timeout(rest * 1000)  # the window is the assertion
            assert len(stream.events) == seen, "a paused stream received events"
            assert stream.quiet_for() >= PAUSED_WINDOW_S, stream.quiet_for()
            assert not stream.done and stream.completion_tokens < TOKENS

            with page.expect_response(posted("/api/continue"), timeout=UI_TIMEOUT_MS) as answer:
                page.get_by_role("button", name="Continue", exact=True).click()
            resumed = barrier_answer(answer.value, workers)
            reading.finish(timeout=30.0)
            assert stream.status == 200 and stream.done, "the stream did not end with [DONE]"
            assert stream.completion_tokens == TOKENS
            assert stream.events[-1]["meta_info"]["finish_reason"]["type"] == "length"
            expect(state).to_have_attribute("data-paused", "false")
            expect(by_testid(page, f"operation-{resumed['op_id']}")).to_be_visible()

            self.drain_and_undrain(page, workers[-1], shots)

            # A narrow window: no sideways scrolling of the page; controls stay in view.
            page.set_viewport_size({"width": 400, "height": 900})
            widths = page.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
            )
            assert widths[0] <= widths[1], f"the page scrolls sideways at 400 px: {widths}"
            for name in ("pause-button", "continue-button", "pause-mode"):
                box = by_testid(page, name).bounding_box()
                assert box is not None and box["x"] + box["width"] <= 400, (name, box)
            shots.take(page, "narrow")
            page.set_viewport_size({"width": 1280, "height": 900})
            assert not problems.errors, problems.errors
            shots.take(page, "final")

    def drain_and_undrain(self, page: Page, worker: str, shots: Screenshots) -> None:
        """Drain ``worker`` from its row until the row shows drained and safe to delete,
        then Undrain it back to serving."""
        from playwright.sync_api import expect

        row, safe = by_testid(page, f"worker-row-{worker}"), by_testid(page, f"safe-{worker}")
        with page.expect_response(posted(f"/api/workers/{worker}/drain")) as answer:
            by_testid(page, f"drain-{worker}").click()
        assert answer.value.status == 200, answer.value.text()
        expect(row).to_have_attribute("data-state", "drained")
        expect(safe).to_have_attribute("data-safe", "true")
        expect(safe).to_have_text("yes")
        expect(by_testid(page, f"undrain-{worker}")).to_have_attribute("aria-disabled", "false")
        shots.take(page, "drained")
        with page.expect_response(posted(f"/api/workers/{worker}/undrain")) as answer:
            by_testid(page, f"undrain-{worker}").click()
        assert answer.value.status == 200, answer.value.text()
        expect(row).to_have_attribute("data-state", "serving")
        expect(safe).to_have_attribute("data-safe", "false")
