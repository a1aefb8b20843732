"""A thousand workers on one router (issue 24, point 9), simulated: ``switchboard bench
workers`` run at 1,000 against the control side of ``switchboard up`` (the real router
and admin app), and its figures held to the issue's bounds.

Each simulated worker is a real ``WorkerLink`` (registration, heartbeats, the pause
barrier answered by the worker's own code), 250 to a process. The bench's run is taken
once for the module; each test reads one figure of it, the median of a few samples. CPU
is the router process's CPU time (user + system) over wall time, never wall time alone.
While every worker is registered the operator console is opened in Chromium: it must
connect, list every worker and report no error; its screenshot goes to the test's tmp
dir, and with ``SWITCHBOARD_WRITE_FIGURES`` set also to ``docs/figures/`` (the one
``docs/benchmarks.md`` shows).

Two of the issue's bounds are not met here, and the docs say so with the figures: the
router's memory per worker (ZeroMQ alone costs 75-80 KiB for each worker's three
connections, measured beside it with bare pyzmq; the test holds what the router uses
beyond that to :data:`OWN_KIB_CEILING`) and idle CPU (held to :data:`CPU_CEILING`).
Both ceilings are regression bounds at twice the issue's figure, not the issue's bounds.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from switchboard.bench.workers import WorkersPlan, run_workers
from switchboard.bench.workers_stack import ControlStack
from switchboard.bench.workers_stats import TARGETS
from tests.integration.harness.console_page import UI_TIMEOUT_MS, PageProblems, chromium
from tests.integration.harness.polling import REPO_ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.integration

COUNT = 1000
PLAN = WorkersPlan(count=COUNT, barriers=3, reads=5, cpu_windows=3, cpu_window_s=3.0, settle_s=2.0)
#: The bound held for idle CPU: the issue asks 0.05 and the router measures 0.05-0.06 on
#: this machine (the docs give the figure); a regression past twice that fails.
CPU_CEILING = 0.10
#: The bound held for the router's memory per worker beyond ZeroMQ's: measured 4-16 KiB
#: (the issue's 10 KiB is for all of it, which ZeroMQ alone exceeds).
OWN_KIB_CEILING = 20.0
FIGURES_ENV = "SWITCHBOARD_WRITE_FIGURES"
SCREENSHOT = "console_workers.png"


def _shoot(stack: ControlStack, directory: Path, seen: dict[str, Any]) -> None:
    """Open the console with every worker registered; check it is usable; screenshot."""
    from playwright.sync_api import expect

    with chromium() as browser:
        page: Page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = PageProblems()
        try:
            problems.watch(page)
            started = time.monotonic()
            page.goto(f"{stack.admin_url}/#token={stack.token}")
            expect(page.get_by_test_id("connection")).to_have_attribute(
                "data-connection", "live", timeout=UI_TIMEOUT_MS
            )
            rows = page.locator("[data-testid^='worker-row-']")
            expect(rows).to_have_count(COUNT, timeout=UI_TIMEOUT_MS)
            seen["rows_s"] = time.monotonic() - started
            expect(page.get_by_test_id("state-sim-00999")).to_have_text("serving")
            page.get_by_test_id("worker-count").scroll_into_view_if_needed()
            seen["count_text"] = page.get_by_test_id("worker-count").text_content()
            path = directory / SCREENSHOT
            page.screenshot(path=str(path))
            seen["screenshot"] = path
            seen["errors"] = list(problems.errors)
        finally:
            page.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The bench's run at 1,000 workers, with what the console showed in ``console``."""
    directory = tmp_path_factory.mktemp("scale-workers")
    seen: dict[str, Any] = {}
    doc = run_workers(PLAN, on_registered=lambda stack: _shoot(stack, directory, seen))
    if os.environ.get(FIGURES_ENV):
        shutil.copy(seen["screenshot"], REPO_ROOT / "docs" / "figures" / SCREENSHOT)
    yield {**doc, "console": seen}


def _bound(name: str) -> float:
    """The issue's bound for figure ``name``."""
    return TARGETS[name][2]


class TestAThousandWorkers:
    def test_every_worker_took_part(self, run: dict[str, Any]) -> None:
        """Every simulated worker stayed registered and applied the last continue."""
        assert run["workers_check"] == {
            "registered_at_stop": COUNT,
            "applied_last_continue": COUNT,
            "count": COUNT,
        }

    def test_pause_barrier(self, run: dict[str, Any]) -> None:
        """Pause -> every worker acks -> answered: the median is within 1 s."""
        assert run["figures"]["pause_barrier_s"] <= _bound("pause_barrier_s"), run["samples"]

    def test_list_workers(self, run: dict[str, Any]) -> None:
        """``GET /api/workers`` listing all 1,000: the median is within 100 ms."""
        assert run["figures"]["list_workers_s"] <= _bound("list_workers_s"), run["samples"]

    def test_metrics_scrape(self, run: dict[str, Any]) -> None:
        """The admin app's ``/metrics`` with 1,000 workers: the median is within 1 s."""
        assert run["figures"]["metrics_scrape_s"] <= _bound("metrics_scrape_s"), run["samples"]

    def test_router_idle_cpu(self, run: dict[str, Any]) -> None:
        """The router's CPU time per wall second, heartbeats flowing: at most
        :data:`CPU_CEILING` (the issue's 0.05 is reported, not met; see the module)."""
        cores = run["figures"]["router_idle_cores"]
        assert 0 < cores <= CPU_CEILING, run["samples"]["router_idle_cores"]

    def test_router_memory_beyond_zeromq(self, run: dict[str, Any]) -> None:
        """The router's memory per worker beyond what bare ZeroMQ costs for the same
        connections is within :data:`OWN_KIB_CEILING` (the issue's 10 KiB is missed)."""
        figures = run["figures"]
        assert figures["zmq_floor_kib_per_worker"] > 0, figures
        assert figures["own_kib_per_worker"] <= OWN_KIB_CEILING, figures

    def test_console_is_usable(self, run: dict[str, Any]) -> None:
        """The console connected, listed every worker within its UI wait, and reported no
        error; the screenshot was written."""
        console = run["console"]
        assert console["errors"] == [], console["errors"]
        assert console["rows_s"] <= UI_TIMEOUT_MS / 1000
        assert str(COUNT) in (console["count_text"] or "").replace(",", ""), console
        assert Path(console["screenshot"]).stat().st_size > 10_000
