"""The fault suite (marker ``fault``): one real ``switchboard up`` per test, faults injected
from outside, figures printed per test and gathered in the terminal summary.

Long variants (a 30-minute soak, more requests and frames) run with ``make soak``
(``SWITCHBOARD_SOAK=1``). Under ``CI=true`` a missing component fails, never skips
(every module is also marked ``integration``, which the suite-wide hook enforces).
"""

from __future__ import annotations

import pytest

from tests.fault.harness.figures import REPORTED
from tests.fault.harness.modes import SOAK


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every fault test's figures, in the order they ran."""
    if not REPORTED:
        return
    title = "fault suite figures" + (" (soak)" if SOAK else "")
    terminalreporter.section(title)
    for figures in REPORTED:
        terminalreporter.write_line(figures.render())
