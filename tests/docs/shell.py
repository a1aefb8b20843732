"""Running a documented script in bash, in a process group of its own, and stopping all of it.

:func:`run_bash` starts ``bash`` in a new session (so the script and every process it
puts in the background share one process group), waits for it with a deadline, then
stops whatever of the group is still running: SIGTERM, a bounded wait, SIGKILL. A
process that needed SIGKILL is a problem the caller reports; a script that outlived its
deadline is killed the same way and said so.

The script's exported variables at exit are read back (``env -0`` in an EXIT trap), so
the caller can carry them to the next block, as a reader's terminal would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

__all__ = ["BashRun", "group_members", "run_bash", "started_bash", "stop_group"]

#: How long a process group gets to stop on SIGTERM before SIGKILL: a stack's whole stop
#: fits in its stop_grace_s (28 s by default), and a reaped process a moment more.
STOP_S = 32.0
_ENV_TRAP = "trap '__status=$?; env -0 > \"$__DOCS_ENV_OUT\"; exit $__status' EXIT\n"
#: Variables a shell sets for itself, never carried from one block to the next.
_SHELL_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "__DOCS_ENV_OUT"})


@dataclass
class BashRun:
    """How a script ended: its status (None: killed at its deadline), its output
    (stdout and stderr interleaved), what it exported, and what went wrong stopping it."""

    status: int | None
    output: str
    exported: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def group_members(group: int) -> list[psutil.Process]:
    """The live (not zombie) processes of process group ``group``."""
    members = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if os.getpgid(process.pid) == group and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
    return members


def stop_group(group: int) -> list[str]:
    """SIGTERM every process of ``group``, wait up to :data:`STOP_S`, SIGKILL the rest;
    the problems (a process that ignored SIGTERM)."""
    members = group_members(group)
    if not members:
        return []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    _, alive = psutil.wait_procs(members, timeout=STOP_S)
    if not alive:
        return []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=5)
    names = ", ".join(" ".join(p.cmdline()[:4]) for p in alive if p.is_running())
    return [f"still running {STOP_S:.0f} s after SIGTERM, killed: {names or len(alive)}"]


def _read_env(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    entries = path.read_bytes().decode(errors="replace").split("\0")
    return dict(entry.partition("=")[::2] for entry in entries if "=" in entry)


@contextlib.contextmanager
def started_bash(
    script: str, env: Mapping[str, str], cwd: Path
) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    """bash running ``script`` in a new session; yields it, its output file and the file
    its exports land in. On the way out the whole group is stopped (SIGTERM, then SIGKILL)."""
    with tempfile.TemporaryDirectory(prefix="docs-bash-") as scratch:
        output_path, env_path = Path(scratch) / "output", Path(scratch) / "env"
        with open(output_path, "wb") as output:
            process = subprocess.Popen(
                ["bash", "--noprofile", "--norc", "-c", _ENV_TRAP + script],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env={**env, "__DOCS_ENV_OUT": str(env_path)},
                start_new_session=True,
            )
        try:
            yield process, output_path, env_path
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_S)
            stop_group(process.pid)


def run_bash(script: str, env: Mapping[str, str], cwd: Path, timeout: float) -> BashRun:
    """Run ``script`` to its end (at most ``timeout`` s), then stop what it left running."""
    with started_bash(script, env, cwd) as (process, output_path, env_path):
        deadline = time.monotonic() + timeout
        status: int | None = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            status = process.wait(timeout=max(0.0, deadline - time.monotonic()))
        problems = [] if status is not None else [f"still running after {timeout:.0f} s"]
        # What the script left in the background is stopped here, before its output is read.
        problems += stop_group(process.pid)
        exported = {
            name: value
            for name, value in _read_env(env_path).items()
            if name not in _SHELL_OWN and env.get(name) != value
        }
        output = output_path.read_text(errors="replace")
    return BashRun(status, output, exported, problems)
