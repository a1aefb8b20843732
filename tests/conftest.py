"""Suite-wide hooks: remember each phase's report, and never let CI skip an integration test.

Under ``CI=true`` a skipped integration test (a missing executable, module or service)
is turned into a failure: in CI a component that is missing is a broken build, not a
reason to pass quietly.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest


def running_in_ci() -> bool:
    """Whether this run is CI's (``CI=true``)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    if (
        running_in_ci()
        and report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("integration") is not None
    ):
        report.outcome = "failed"
        report.longrepr = f"CI=true: an integration test may not skip ({report.longrepr})"
    return report
