"""One engine-check run: the run dir, the key, the vocabulary file, the engine, the checks.

:func:`check_engine_command` makes a private run dir (mode 0700) with a fresh stack key and the
vocabulary file, binds the routers' side of the engine's endpoints, starts the command as
the supervisor does (:mod:`switchboard.supervisor.engine_command`), runs every check in
:data:`~switchboard.engine_check.findings.DUTIES` order, stops the engine (SIGTERM, then
SIGKILL) and removes the run dir. :func:`check_engine_on_run_dir` checks an engine the user started
on a run dir's endpoints. Both return one finding per duty.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

from router_core.credentials import KEY_FILE, load_or_create, read_key
from router_core.endpoints import EngineEndpoints
from switchboard.engine_check.checks import (
    UNDECODABLE_FIX,
    check_batching,
    check_generate,
    check_load,
    check_max_new_tokens,
    check_stops,
)
from switchboard.engine_check.command_checks import check_commands
from switchboard.engine_check.control_checks import (
    check_abort,
    check_bad_frames,
    check_embed,
    check_freeze_gc,
    check_restart,
)
from switchboard.engine_check.engine_process import EngineProcess
from switchboard.engine_check.findings import DUTIES, Finding, Status, failed, not_run, ordered
from switchboard.engine_check.harness import Harness, Undecodable
from switchboard.engine_check.pause_checks import check_pauses
from switchboard.engine_check.session import Session
from switchboard.supervisor.engine_command import (
    VOCAB_FILE,
    EnginePlaces,
    engine_argv,
    engine_environment,
)
from switchboard.text import TextCodec
from switchboard.text.vocab_file import write_vocab_file

__all__ = ["CHECKS", "check_engine_command", "check_engine_on_run_dir", "run_checks"]

#: The return address engine-check puts in every request, as a worker's.
_WORKER: Final = "worker-engine-check"

#: Every check in order: the duties it decides (the rows of :data:`DUTIES` it returns).
CHECKS: Final[tuple[tuple[tuple[str, ...], Callable[[Session], list[Finding]]], ...]] = (
    (("load.first", "load.interval"), check_load),
    (("generate.rows", "generate.usage"), check_generate),
    (("generate.batching",), check_batching),
    (("generate.max_new_tokens",), check_max_new_tokens),
    (("stop.token_ids", "stop.strings", "stop.eos"), check_stops),
    (("abort.one", "abort.all"), check_abort),
    (("pause.abort", "pause.retract", "pause.in_place", "continue", "pause.stale"), check_pauses),
    (("engine_command",), check_commands),
    (("embed",), check_embed),
    (("bad_frames",), check_bad_frames),
    (("freeze_gc",), check_freeze_gc),
    (("restart",), check_restart),
)


def run_checks(session: Session) -> list[Finding]:
    """Run every check; once the engine has exited, the rest are ``not run`` (but
    ``restart``, which starts it again)."""
    findings: list[Finding] = []
    reported = False
    for names, check in CHECKS:
        status = session.process.exit_status() if session.process is not None else None
        # Restart starts the engine again: worth it if it ever served (a LOAD came).
        if status is not None and (check is not check_restart or not session.harness.loads()):
            why = f"the engine exited with status {status} (see the engine's last lines)"
            findings += [not_run(name, why) for name in names]
            continue
        before = len(session.harness.inbox.undecodable)
        found = check(session)
        new = session.harness.inbox.undecodable[before:]
        if new and not reported:
            reported = True  # once: later checks see the same breach again
            found = _with_undecodable(found, new)
        findings += found
    return ordered(findings)


def _with_undecodable(findings: list[Finding], seen: list[Undecodable]) -> list[Finding]:
    """A check's findings, the first turned into a FAIL if the engine sent a message
    that does not decode meanwhile (whatever the check was about, that breaks framing)."""
    if not findings or findings[0].status is Status.FAIL:
        return findings
    first = findings[0]
    more = f" (and {len(seen) - 1} more)" if len(seen) > 1 else ""
    return [
        failed(
            first.name,
            f"a message on {seen[0].socket} does not decode: {seen[0].reason}{more}",
            UNDECODABLE_FIX,
        ),
        *findings[1:],
    ]


def _address(run_dir: Path) -> str:
    return f"ipc://{run_dir / _WORKER}"


def check_engine_command(
    command: str, codec: TextCodec, *, cwd: Path, timeout_s: float
) -> tuple[list[Finding], str]:
    """Check the engine ``command`` starts; the findings and its last lines of output.

    Raises :class:`~switchboard.supervisor.engine_command.EngineCommandError` for a
    command that cannot be split or names an unknown placeholder.
    """
    run_dir = Path(tempfile.mkdtemp(prefix="sb-check-"))
    os.chmod(run_dir, 0o700)
    process: EngineProcess | None = None
    try:
        key_file = run_dir / KEY_FILE
        key = load_or_create(key_file)
        vocab_file = run_dir / VOCAB_FILE
        write_vocab_file(codec, vocab_file)
        endpoints = EngineEndpoints.in_run_dir(run_dir)
        places = EnginePlaces(endpoints, run_dir, key_file, vocab_file, os.getpid())
        argv = engine_argv(command, places)
        process = EngineProcess(argv, engine_environment(places, key), cwd, run_dir / "engine.log")
        with Harness(endpoints) as harness:
            session = Session(harness, key, codec, _address(run_dir), timeout_s, process)
            try:
                process.start()
            except OSError as exc:
                reason = f"cannot run {argv[0]!r}: {exc.strerror}"
                return [not_run(name, reason) for name in DUTIES], ""
            try:
                findings = run_checks(session)
            finally:
                process.stop()
        return findings, process.last_lines(5)
    finally:
        if process is not None:
            process.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


def check_engine_on_run_dir(run_dir: Path, codec: TextCodec, *, timeout_s: float) -> list[Finding]:
    """Check an engine already started on ``run_dir``'s endpoints, with its stack.key."""
    key = read_key(run_dir / KEY_FILE)
    endpoints = EngineEndpoints.in_run_dir(run_dir)
    # Outputs are taken where either router would take them (--outputs-via either way).
    routed = EngineEndpoints.in_run_dir(run_dir, outputs_via="router").outputs
    with Harness(endpoints, also_outputs=[routed]) as harness:
        return run_checks(Session(harness, key, codec, _address(run_dir), timeout_s))
