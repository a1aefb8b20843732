"""``switchboard up --detach``: start the supervisor in a session of its own, return once
it serves.

The starter chooses an *incarnation* token, starts ``switchboard up`` again with it (its
output appended to the run directory's log, :data:`~switchboard.supervisor.stack_record.LOG_FILE`)
and watches the run directory's record (:mod:`~switchboard.supervisor.stack_record`).
Only a record carrying that token and the pid it started, saying ``serving``, is
success: the supervisor writes it after its own readiness wait (admin app and every
worker ready), so a stack already listening on the port, someone else's, never passes
for ours. :func:`judge_start` is that decision, pure; :func:`start_detached` the loop.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

from router_core.run_dir import RunDirError, make_private
from switchboard.supervisor.children import describe_exit
from switchboard.supervisor.log_tail import tail_text
from switchboard.supervisor.preflight import check_port_free
from switchboard.supervisor.settings import SettingsError, StackSettings
from switchboard.supervisor.stack_record import (
    LOG_FILE,
    StackRecord,
    lock_held,
    read_record,
)

__all__ = ["StartVerdict", "failure_cause", "judge_start", "start_detached"]

#: How many of the log's last lines a failure report quotes.
REPORT_LINES = 20
#: How far back in a failed run's log its cause is looked for.
_CAUSE_LINES = 400
#: How long a supervisor that did not serve in time has to stop before SIGKILL.
_ABANDON_S = 30.0
_POLL_INTERVAL_S = 0.1
_CTRL_C_SUFFIX = "; Ctrl-C to stop"


@dataclass(frozen=True)
class StartVerdict:
    """Where a detached start stands: still ``waiting``, ``serving`` (its record), or
    failed: the supervisor ``exited`` (``detail`` says how) or the wait ``timed_out``."""

    kind: Literal["waiting", "serving", "exited", "timed_out"]
    detail: str = ""
    record: StackRecord | None = None


def judge_start(
    exit_code: int | None,
    record: StackRecord | None,
    *,
    pid: int,
    incarnation: str,
    expired: bool,
) -> StartVerdict:
    """The verdict on a start, from the started process's exit code (None: running), the
    run directory's record and whether the wait's bound has passed.

    A record counts only when it is this start's (its ``incarnation`` and ``pid``); an
    exit before serving is a failure even if a record of ours still says serving.
    """
    if exit_code is not None:
        return StartVerdict("exited", describe_exit(exit_code))
    ours = record is not None and record.incarnation == incarnation and record.pid == pid
    if ours and record is not None and record.state == "serving":
        return StartVerdict("serving", record=record)
    if expired:
        return StartVerdict("timed_out")
    return StartVerdict("waiting")


def failure_cause(lines: Sequence[str]) -> str | None:
    """The line of a failed start's log that says why: the supervisor's own refusal or
    ``startup failed:`` line, else its last ``ERROR`` line; None if there is none."""
    for line in lines:
        if line.startswith("switchboard up: ") or "startup failed: " in line:
            return line
    errors = [line for line in lines if " ERROR " in line]
    return errors[-1] if errors else None


def _refusal(err: TextIO, message: str, status: int) -> int:
    print(f"switchboard up: {message}", file=err, flush=True)
    return status


def _log_excerpt(log: Path, offset: int) -> str:
    """The cause (when the log names one) and the last lines of this run's log."""
    lines = tail_text(log, _CAUSE_LINES, start=offset).splitlines()
    if not lines:
        return f" (nothing in its log {log})"
    cause = failure_cause(lines)
    said = f": {cause}" if cause is not None else ""
    tail = "\n".join(lines[-REPORT_LINES:])
    return f"{said}\nthe last lines of its log {log}:\n{tail}"


def _abandon(process: subprocess.Popen[bytes]) -> str:
    """Stop a started supervisor that will not be reported as serving; what it took."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=_ABANDON_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: the group is its pid
        process.wait(timeout=_ABANDON_S)
        return f"stopped with SIGKILL after {_ABANDON_S:.0f} s"
    return "stopped"


def _ports_free(settings: StackSettings) -> str | None:
    """Why the stack's ports cannot be bound now, or None."""
    try:
        check_port_free(settings.host, settings.port, where=f"port {settings.port}")
        check_port_free(
            settings.host, settings.admin_port, where=f"admin_port {settings.admin_port}"
        )
    except SettingsError as exc:
        return str(exc)
    return None


def start_detached(
    settings: StackSettings,
    argv: Sequence[str],
    wait_timeout_s: float,
    out: TextIO,
    err: TextIO,
) -> int:
    """Start ``argv`` (``switchboard up`` with this stack's flags) detached and wait up to
    ``wait_timeout_s`` for it to serve; the exit status.

    0 once it serves, with its serving line, pid, run directory and log on ``out``. 2
    without a run directory (``down`` and ``logs`` find the stack by it) or with one that
    is not private. 1, naming the cause on ``err``: a stack already running from the run
    directory, a port already in use (a server that is not this run directory's stack),
    the supervisor exiting before it served (with its log's last lines), or the bound
    passing (the supervisor is then stopped). 130 on Ctrl-C while waiting (the
    supervisor is stopped too).
    """
    if settings.run_dir is None:
        return _refusal(
            err,
            "--detach needs a run dir (--run-dir DIR or SWITCHBOARD_RUN_DIR): "
            "switchboard down and switchboard logs find the stack by it",
            2,
        )
    try:
        run_dir = make_private(settings.run_dir.expanduser()).resolve()
    except (RunDirError, OSError) as exc:
        return _refusal(err, f"run_dir {settings.run_dir}: {exc}", 2)
    if lock_held(run_dir):
        running = read_record(run_dir)
        pid = f" (supervisor pid {running.pid})" if running is not None else ""
        return _refusal(
            err,
            f"a stack is already running from run dir {run_dir}{pid}; "
            f"switchboard down --run-dir {run_dir} stops it",
            1,
        )
    busy = _ports_free(settings)
    if busy is not None:
        return _refusal(
            err,
            f"{busy}: another server listens there (no stack of run dir {run_dir} "
            "runs: someone else's stack or server)",
            1,
        )
    incarnation = secrets.token_hex(16)
    log = run_dir / LOG_FILE
    with open(log, "ab") as sink:
        offset = sink.tell()
        process = subprocess.Popen(
            [*argv, "--detached-incarnation", incarnation],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + wait_timeout_s
    try:
        while True:
            verdict = judge_start(
                process.poll(),
                read_record(run_dir),
                pid=process.pid,
                incarnation=incarnation,
                expired=time.monotonic() >= deadline,
            )
            if verdict.kind != "waiting":
                break
            time.sleep(_POLL_INTERVAL_S)
    except KeyboardInterrupt:
        # Ctrl-C while waiting means "not this stack": it must not run on unseen.
        how = _abandon(process)
        return _refusal(err, f"interrupted; the supervisor (pid {process.pid}) was {how}", 130)
    if verdict.kind == "exited":
        return _refusal(
            err,
            f"the stack is not serving: its supervisor (pid {process.pid}) exited "
            f"({verdict.detail}){_log_excerpt(log, offset)}",
            1,
        )
    if verdict.kind == "timed_out":
        how = _abandon(process)
        return _refusal(
            err,
            f"the stack was not serving within --wait-timeout-s {wait_timeout_s:g}; its "
            f"supervisor (pid {process.pid}) was {how}{_log_excerpt(log, offset)}",
            1,
        )
    assert verdict.record is not None  # a serving verdict carries its record
    print(verdict.record.serving_line.removesuffix(_CTRL_C_SUFFIX), file=out)
    print(
        f"switchboard up: detached; supervisor pid {process.pid}; run dir {run_dir}; "
        f"log {log}; stop it with: switchboard down --run-dir {run_dir}",
        file=out,
        flush=True,
    )
    # It runs on in its own session: forgotten on purpose (Popen would otherwise warn, at
    # exit, of a child still running).
    process.returncode = 0
    return 0
