"""Run an example script as a test's child process: it dies with the test, then runs as-is.

``python -m tests.standins.example PARENT_PID SCRIPT [ARGS...]`` asks the kernel to stop
this process when ``PARENT_PID`` dies (the examples themselves know nothing of the test
harness), then runs ``SCRIPT`` as ``__main__`` with ``ARGS``.
"""

from __future__ import annotations

import runpy
import sys

from router_core.process import die_with_parent


def main() -> None:
    parent_pid, script = int(sys.argv[1]), sys.argv[2]
    die_with_parent(parent_pid)
    sys.argv = sys.argv[2:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
