"""The duties of the pause/continue barrier: the three pause modes, continue, and an
operation older than the last one applied.

Each function takes the :class:`~switchboard.engine_check.session.Session` and returns
its rows' findings. A request that must still run when the PAUSE arrives and finishes
first makes long requests longer (:meth:`Session.lengthen`) and the check is tried
again; if it still finishes first the row is ``not run``, never a failure.
"""

from __future__ import annotations

from typing import Final

from router_core.wire.control import PauseMode
from switchboard.engine_check.checks import run_problems, same_run, verdict
from switchboard.engine_check.findings import Finding, not_run
from switchboard.engine_check.rows import rows_framed_after
from switchboard.engine_check.session import LONG_PROMPT, TOO_FAST, Baseline, Session
from switchboard.engine_check.verdicts import Problem

__all__ = ["ACK_GRACE_S", "QUIET_S", "check_pauses"]

#: Seconds after an ACK in which rows sent before it may still arrive (another socket).
ACK_GRACE_S: Final = 0.1
#: Seconds without rows that show a paused engine is paused.
QUIET_S: Final = 0.4


def _long_baseline(session: Session) -> Baseline:
    """The long prompt's run alone at the current length (run once per length)."""
    tokens = session.long_tokens
    if tokens not in session.long_baselines:
        prompt, params = session.prompt(LONG_PROMPT), session.greedy(tokens)
        session.long_baselines[tokens] = Baseline(
            prompt, params, session.run("long", prompt, params)
        )
    return session.long_baselines[tokens]


def _pause_keeping(session: Session, mode: PauseMode) -> Finding:
    """Pause in ``mode`` while a request runs: no rows while paused, the same ids after.
    A request that finishes before the pause makes requests longer, and it is tried again."""
    for _ in range(2):
        found = _pause_once(session, mode, _long_baseline(session))
        if found is not None:
            return found
        if not session.lengthen():
            break
    return not_run(f"pause.{mode}", TOO_FAST)


def _pause_once(session: Session, mode: PauseMode, base: Baseline) -> Finding | None:
    """One try of :func:`_pause_keeping`; None if the request finished before the pause."""
    name = f"pause.{mode}"
    rid = session.generate(mode, base.prompt, base.params)
    session.wait_rows([rid], rows=2)
    if session.runs([rid])[0].finished:
        return None
    since = len(session.harness.inbox.outputs)
    _, problems = session.command(mode)
    acked_ns = session.last_ack_sent_ns
    session.harness.pump(ACK_GRACE_S)
    at_pause = session.runs([rid])[0]
    session.harness.pump(QUIET_S)
    paused = session.runs([rid])[0]
    # Finished before the engine applied the pause (its own clock says so, when it
    # stamps): the pause held nothing, so undo it and try a longer request. A finish
    # framed after the ACK is an engine that kept stepping, judged below.
    before_ack = not acked_ns or 0 < at_pause.finish_sent_ns <= acked_ns
    if at_pause.finished and not problems and before_ack:
        session.command(None)
        return None
    # Rows the engine framed after its ACK (its own clock: exact, however late they
    # arrive); without stamps, rows that arrived after the ACK's grace.
    if acked_ns:
        late = rows_framed_after(rid, session.harness.output_messages(since), acked_ns)
    else:
        late = paused.rows - at_pause.rows
    if late:
        problems.append(
            (
                f"{late} rows made after the ACK of PAUSE {mode}",
                f"on PAUSE {mode}, stop stepping before the ACK and until CONTINUE "
                "(protocol.md 3.4, 5.7)",
            )
        )
    _, resumed = session.command(None)
    session.continues.append(resumed)
    run = session.wait_finished([rid])[0]
    problems += run_problems(run, session.timeout_s)
    if run.finished:
        problems += same_run(run, base.run.ids, f"paused in {mode} and continued")
    return verdict(name, problems, f"no rows while paused; {len(run.ids)} ids as unpaused")


def check_pauses(session: Session) -> list[Finding]:
    """``pause.abort``, ``pause.retract``, ``pause.in_place``, ``continue``, ``pause.stale``."""
    findings: list[Finding] = []

    def pause_abort(rids: list[str]) -> list[Problem]:
        _, problems = session.command("abort")
        return problems

    def resume() -> None:
        session.command(None)  # back to serving; CONTINUE is judged by the rows below

    got = session.interrupt("pause", 2, pause_abort, undo=resume)
    if isinstance(got, str):
        findings.append(not_run("pause.abort", got))
    else:
        resume()
        runs, problems = got
        problems += [p for run in runs for p in run_problems(run, session.timeout_s)]
        problems += [
            (
                f"PAUSE abort: {run.rid} finished {run.finish}",
                "on PAUSE abort, finish every running and waiting request with an abort row, "
                "then ACK (protocol.md 3.4, 5.7)",
            )
            for run in runs
            if run.finish_type != "abort"
        ]
        findings.append(verdict("pause.abort", problems, "running requests aborted"))
    if session.rows_ok:
        findings += [_pause_keeping(session, mode) for mode in ("retract", "in_place")]
    else:
        findings += [
            not_run(f"pause.{mode}", "needs generate.rows to conform")
            for mode in ("retract", "in_place")
        ]
    if not session.continues:
        findings.append(not_run("continue", "no pause that keeps requests was checked"))
    else:
        problems = [p for each in session.continues for p in each]
        findings.append(
            verdict(
                "continue", problems, f"{len(session.continues)} CONTINUEs acked, requests resumed"
            )
        )
    findings.append(_check_stale(session))
    return findings


def _check_stale(session: Session) -> Finding:
    """An op older than the last applied is acknowledged and not applied."""
    name = "pause.stale"
    rids = session.start_long("stale", 1)
    if isinstance(rids, str):
        return not_run(name, rids)
    stale = f"{session.incarnation}-1"
    _, problems = session.command("abort", stale)
    run = session.wait_finished(rids)[0]
    problems += run_problems(run, session.timeout_s)
    if run.finish_type == "abort":
        problems.append(
            (
                f"a PAUSE abort with the older op {stale} aborted a request",
                "acknowledge but do not apply an op no newer than the last applied, by "
                "(incarnation, seq) (protocol.md 3.4, 5.7)",
            )
        )
    return verdict(name, problems, f"older op {stale} acked, not applied")
