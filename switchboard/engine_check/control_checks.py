"""The duties of aborts, pauses, embeddings, bad input, freeze-GC and restarts.

Each function takes the :class:`~switchboard.engine_check.session.Session` and returns
its rows' findings. Requests that must still be running when a command arrives ask for
:data:`~switchboard.engine_check.session.LONG_TOKENS` ids; one that finished first makes
the check ``not run`` (the engine was too fast to tell), never a failure.
"""

from __future__ import annotations

import msgspec

from router_core.wire import Header, Kind, encode_header, encode_payload
from router_core.wire.control import FreezeGC, PauseMode
from router_core.wire.requests import EmbeddingRequest
from switchboard.engine_check.checks import run_problems, same_run, verdict
from switchboard.engine_check.findings import Finding, failed, not_run
from switchboard.engine_check.rows import RequestRun
from switchboard.engine_check.session import LONG_PROMPT, LONG_TOKENS, Baseline, Session
from switchboard.engine_check.verdicts import Problem, load_problems

__all__ = [
    "check_abort",
    "check_bad_frames",
    "check_embed",
    "check_freeze_gc",
    "check_pauses",
    "check_restart",
]

#: Seconds after an ACK in which rows sent before it may still arrive (another socket).
ACK_GRACE_S = 0.1
#: Seconds without rows that show a paused engine is paused.
QUIET_S = 0.4

_ABORT_FIX = (
    'finish an aborted request with one row whose finished_reasons is {"type": "abort", '
    '"message": ...}; abort_all aborts every request of header.reply_to[0] (protocol.md 3.2, 8)'
)
_NEEDS_ROWS = "a request's rows are judged only once generate.rows conforms"
_TOO_FAST = "a request finished before the command arrived (the engine is too fast to tell)"


def _aborted(run: RequestRun) -> bool:
    return run.finish_type == "abort"


def _running(session: Session, label: str, count: int) -> list[str] | str:
    """Start ``count`` long requests and wait for a row of each: their rids, or why the
    check cannot go on (a request finished first, or got no row)."""
    prompt = session.prompt(LONG_PROMPT)
    rids = [session.generate(label, prompt, session.greedy(LONG_TOKENS)) for _ in range(count)]
    session.wait_rows(rids)
    runs = session.runs(rids)
    if any(run.finished for run in runs):
        return _TOO_FAST
    if not all(run.rows for run in runs):
        return f"a request got no row within {session.timeout_s:g} s"
    return rids


def check_abort(session: Session) -> list[Finding]:
    """``abort.one``: ABORT one of two running requests; ``abort.all``: abort_all."""
    findings: list[Finding] = []
    rids = _running(session, "abort", 2)
    if isinstance(rids, str):
        findings.append(not_run("abort.one", rids))
    else:
        session.abort(rids[0])
        target = session.wait_finished(rids[:1])[0]
        other = session.wait_finished(rids[1:])[0]
        problems = run_problems(target, session.timeout_s) + run_problems(other, session.timeout_s)
        if not _aborted(target):
            problems.append((f"the aborted request finished {target.finish}", _ABORT_FIX))
        if _aborted(other):
            problems.append(
                (
                    f"the request not aborted finished {other.finish} too",
                    "abort only the request named by the ABORT's rid and reply_to "
                    "(protocol.md 3.2)",
                )
            )
        findings.append(verdict("abort.one", problems, f"aborted: {target.finish}"))
    rids = _running(session, "abort-all", 2)
    if isinstance(rids, str):
        findings.append(not_run("abort.all", rids))
    else:
        session.abort(None)
        runs = session.wait_finished(rids)
        problems = [p for run in runs for p in run_problems(run, session.timeout_s)]
        problems += [
            (f"abort_all: {run.rid} finished {run.finish}", _ABORT_FIX)
            for run in runs
            if not _aborted(run)
        ]
        findings.append(verdict("abort.all", problems, f"{len(runs)} aborted"))
    return findings


def _long_baseline(session: Session) -> Baseline:
    prompt, params = session.prompt(LONG_PROMPT), session.greedy(LONG_TOKENS)
    return Baseline(prompt, params, session.run("long", prompt, params))


def _pause_keeping(session: Session, mode: PauseMode, base: Baseline) -> Finding:
    """Pause in ``mode`` while a request runs: no rows while paused, the same ids after."""
    name = f"pause.{mode}"
    rid = session.generate(mode, base.prompt, base.params)
    session.wait_rows([rid], rows=2)
    if session.runs([rid])[0].finished:
        return not_run(name, _TOO_FAST)
    _, problems = session.command(mode)
    session.harness.pump(ACK_GRACE_S)
    at_pause = session.runs([rid])[0]
    session.harness.pump(QUIET_S)
    paused = session.runs([rid])[0]
    if at_pause.finished and not problems:
        return not_run(name, _TOO_FAST)
    if paused.rows > at_pause.rows:
        problems.append(
            (
                f"{paused.rows - at_pause.rows} rows in the {QUIET_S:g} s after the ACK",
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
    rids = _running(session, "pause", 2)
    if isinstance(rids, str):
        findings.append(not_run("pause.abort", rids))
    else:
        _, problems = session.command("abort")
        runs = session.wait_finished(rids)
        problems += [p for run in runs for p in run_problems(run, session.timeout_s)]
        problems += [
            (
                f"PAUSE abort: {run.rid} finished {run.finish}",
                "on PAUSE abort, finish every running and waiting request with an abort row, "
                "then ACK (protocol.md 3.4, 5.7)",
            )
            for run in runs
            if not _aborted(run)
        ]
        findings.append(verdict("pause.abort", problems, "running requests aborted"))
        session.command(None)  # back to serving; judged by the rows below
    if session.rows_ok:
        base = _long_baseline(session)
        findings += [_pause_keeping(session, mode, base) for mode in ("retract", "in_place")]
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
    rids = _running(session, "stale", 1)
    if isinstance(rids, str):
        return not_run(name, rids)
    stale = f"{session.incarnation}-1"
    _, problems = session.command("abort", stale)
    run = session.wait_finished(rids)[0]
    problems += run_problems(run, session.timeout_s)
    if _aborted(run):
        problems.append(
            (
                f"a PAUSE abort with the older op {stale} aborted a request",
                "acknowledge but do not apply an op no newer than the last applied, by "
                "(incarnation, seq) (protocol.md 3.4, 5.7)",
            )
        )
    return verdict(name, problems, f"older op {stale} acked, not applied")


def check_embed(session: Session) -> list[Finding]:
    """``embed``: an EMBED is answered within the bound (a vector, or an abort row)."""
    rid = session.new_rid("embed")
    request = EmbeddingRequest(rid=rid, input_ids=session.prompt())
    session.harness.send(Kind.EMBED, request, rid=rid, reply_to=session.address)
    run = session.wait_finished([rid])[0]
    problems = run_problems(run, session.timeout_s)
    if run.finished and not _aborted(run):
        vector = run.embedding or []
        if not vector or not all(isinstance(value, int | float) for value in vector):
            problems.append(
                (
                    f"finished {run.finish} without an embedding vector",
                    "answer EMBED with an EMBEDDING_BATCH row holding embeddings (floats), "
                    "or an abort row if the engine does not embed (protocol.md 3.6, 8)",
                )
            )
    what = "aborted (does not embed)" if _aborted(run) else f"vector of {len(run.embedding or [])}"
    return [verdict("embed", problems, what)]


def _garbage(session: Session) -> list[list[bytes]]:
    address = session.address
    generate = Header(Kind.GENERATE, [session.new_rid("bad")], [address])
    missing_ids = session.new_rid("bad")
    unknown_kind = msgspec.msgpack.encode([99, [], [], 0, "", "", []])
    return [
        [b"\xc1 not msgpack", b"\x80"],
        [encode_header(generate)],
        [
            encode_header(Header(Kind.GENERATE, [missing_ids], [address])),
            encode_payload({"rid": missing_ids}),
        ],
        [unknown_kind, encode_payload({})],
    ]


def check_bad_frames(session: Session) -> list[Finding]:
    """``bad_frames``: garbage does not stop the engine; a request after it is exact."""
    name = "bad_frames"
    for frames in _garbage(session):
        session.harness.send_raw(frames)
    base = session.baseline
    run = session.run("after-bad", base.prompt, base.params) if base else None
    gone = session.engine_gone()
    if gone is not None:
        return [
            failed(
                name,
                f"after a garbage message {gone}",
                "count and skip a message that does not decode; never exit on a bad frame "
                "(protocol.md 7.1, 8)",
            )
        ]
    if base is None or run is None:
        return [not_run(name, "the engine lives on; " + _NEEDS_ROWS)]
    problems = run_problems(run, session.timeout_s)
    if run.finished:
        problems += same_run(run, base.run.ids, "after garbage")
    return [verdict(name, problems, "4 garbage messages skipped; the next request exact")]


def check_freeze_gc(session: Session) -> list[Finding]:
    """``freeze_gc``: a FREEZE_GC does not break the engine (a request still completes)."""
    if not session.rows_ok:
        return [not_run("freeze_gc", _NEEDS_ROWS)]
    before = len(session.harness.inbox.outputs)
    session.harness.send(Kind.FREEZE_GC, FreezeGC(reason="control"))
    run = session.run("after-gc", session.prompt(), session.greedy())
    forwarded = any(
        received.message.header.kind is Kind.FREEZE_GC
        for received in session.harness.inbox.outputs[before:]
    )
    note = (
        "forwarded to outputs"
        if forwarded
        else "not forwarded to outputs (SHOULD, protocol.md 5.9)"
    )
    return [
        verdict("freeze_gc", run_problems(run, session.timeout_s), f"request completed; {note}")
    ]


def check_restart(session: Session) -> list[Finding]:
    """``restart``: after SIGKILL and a new start, a new LOAD (new engine_started_ns), and a
    request completes."""
    name, process = "restart", session.process
    if process is None:
        return [not_run(name, "needs --engine-command (engine-check must start the engine)")]
    loads = session.harness.loads()
    old = loads[-1].engine_started_ns if loads else None
    process.kill()
    session.harness.reconnect_inbound()
    since = len(session.harness.inbox.events)
    process.start()
    harness = session.harness
    if not harness.wait(lambda: bool(harness.loads(since)), session.timeout_s):
        gone = session.engine_gone() or f"no LOAD within {session.timeout_s:g} s of the restart"
        return [failed(name, gone, "publish a LOAD at every start (protocol.md 5.8, 8)")]
    snapshot = harness.loads(since)[0]
    problems: list[Problem] = load_problems(snapshot, session.key)
    if snapshot.engine_started_ns == old:
        problems.append(
            (
                f"engine_started_ns {old} again after a restart",
                "set engine_started_ns to when this process started, so a restart shows "
                "(protocol.md 3.5, 5.11)",
            )
        )
    base = session.baseline
    if base is not None:
        run = session.run("after-restart", base.prompt, base.params)
        problems += run_problems(run, session.timeout_s)
        if run.finished:
            problems += same_run(run, base.run.ids, "after the restart")
    return [
        verdict(
            name,
            problems,
            f"new engine_started_ns {snapshot.engine_started_ns}"
            + ("; a request completed" if base is not None else ""),
        )
    ]
