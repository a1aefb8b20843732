"""The real ``switchboard up`` a doc file's examples run against.

One per doc file that needs it, started at its first example that does: two workers,
the built-in engine, the default (real) tokenizer, on free loopback ports, in the
private temporary run directory it makes itself. The token is the one its serving
line's console URL carries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.integration.harness.http_stack import free_port
from tests.integration.harness.supervisor import Supervisor, stack_env, up_argv

__all__ = ["DocStack", "start_stack"]

_TOKEN = re.compile(r"#token=([^;\s]+)")


@dataclass
class DocStack:
    """A running stack: its worker and admin ports, run directory, token and process."""

    port: int
    admin_port: int
    run_dir: Path
    token: str
    supervisor: Supervisor

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def close(self) -> list[str]:
        """Stop it; the problems (a process left running, SIGTERM ignored)."""
        problems = self.supervisor.shutdown()
        if problems:
            print(self.supervisor.stderr()[-6000:])
        return problems


def start_stack(cache_dir: Path, log_dir: Path) -> DocStack:
    """``switchboard up --workers 2`` on free ports, serving once this returns."""
    port, admin_port = free_port(), free_port()
    # No --run-dir: the stack makes and removes its own, as under make run.
    argv = up_argv("--port", str(port), "--admin-port", str(admin_port), "--workers", "2")
    log_dir.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(argv, stack_env(cache_dir), log_dir)
    try:
        supervisor.wait_serving()
    except BaseException:
        supervisor.shutdown()
        print(supervisor.stderr()[-6000:])
        raise
    found = _TOKEN.search(supervisor.stdout())
    assert found is not None, f"no console token on the serving line: {supervisor.stdout()!r}"
    return DocStack(port, admin_port, supervisor.run_dir, found.group(1), supervisor)
