"""The duties of aborts, embeddings, bad input, freeze-GC and restarts.

Each function takes the :class:`~switchboard.engine_check.session.Session` and returns
its rows' findings. Requests that must still be running when an ABORT arrives are
started by :meth:`~switchboard.engine_check.session.Session.start_long`; one that
finished first makes the row ``not run`` (the engine was too fast to tell), never a
failure.
"""

from __future__ import annotations

import msgspec

from router_core.wire import Header, Kind, encode_header, encode_payload
from router_core.wire.control import FreezeGC
from router_core.wire.requests import EmbeddingRequest
from switchboard.engine_check.checks import run_problems, same_run, verdict
from switchboard.engine_check.findings import Finding, failed, not_run
from switchboard.engine_check.rows import RequestRun
from switchboard.engine_check.session import Session
from switchboard.engine_check.verdicts import Problem, load_problems

__all__ = [
    "check_abort",
    "check_bad_frames",
    "check_embed",
    "check_freeze_gc",
    "check_restart",
]

#: Seconds in which what a killed engine sent before it died may still arrive.
DRAIN_S = 0.1

_ABORT_FIX = (
    'finish an aborted request with one row whose finished_reasons is {"type": "abort", '
    '"message": ...}; abort_all aborts every request of header.reply_to[0] (protocol.md 3.2, 8)'
)
_NEEDS_ROWS = "a request's rows are judged only once generate.rows conforms"


def _aborted(run: RequestRun) -> bool:
    return run.finish_type == "abort"


def _abort_problems(run: RequestRun, timeout_s: float) -> list[Problem]:
    """What is wrong with how an aborted request ended: no row, or no abort."""
    if not run.finished:
        return [(f"{run.rid}: aborted, no finishing row within {timeout_s:g} s", _ABORT_FIX)]
    if not _aborted(run):
        return [(f"{run.rid}: aborted, finished {run.finish}", _ABORT_FIX)]
    return []


def check_abort(session: Session) -> list[Finding]:
    """``abort.one``: ABORT one of two running requests; ``abort.all``: abort_all."""
    findings: list[Finding] = []

    def abort_first(rids: list[str]) -> list[Problem]:
        session.abort(rids[0])
        return []

    got = session.interrupt("abort", 2, abort_first)
    if isinstance(got, str):
        findings.append(not_run("abort.one", got))
    else:
        (target, other), _ = got
        problems = _abort_problems(target, session.timeout_s) + run_problems(
            other, session.timeout_s
        )
        if _aborted(other):
            problems.append(
                (
                    f"the request not aborted finished {other.finish} too",
                    "abort only the request named by the ABORT's rid and reply_to "
                    "(protocol.md 3.2)",
                )
            )
        findings.append(verdict("abort.one", problems, f"aborted: {target.finish}"))

    def abort_all(rids: list[str]) -> list[Problem]:
        session.abort(None)
        return []

    got = session.interrupt("abort-all", 2, abort_all)
    if isinstance(got, str):
        findings.append(not_run("abort.all", got))
    else:
        runs, _ = got
        problems = [p for run in runs for p in _abort_problems(run, session.timeout_s)]
        findings.append(verdict("abort.all", problems, f"{len(runs)} aborted"))
    return findings


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
    harness = session.harness
    process.kill()
    harness.reconnect_inbound()
    harness.pump(DRAIN_S)  # what the killed engine sent before it died
    old = {snapshot.engine_started_ns for snapshot in harness.loads()}
    since = len(harness.inbox.events)
    process.start()

    def renewed() -> bool:
        return any(each.engine_started_ns not in old for each in harness.loads(since))

    if not harness.wait(renewed, session.timeout_s):
        if harness.loads(since):
            seen = harness.loads(since)[0].engine_started_ns
            return [
                failed(
                    name,
                    f"engine_started_ns {seen} again after a restart",
                    "set engine_started_ns to when this process started, so a restart "
                    "shows (protocol.md 3.5, 5.11)",
                )
            ]
        gone = session.engine_gone() or f"no LOAD within {session.timeout_s:g} s of the restart"
        return [failed(name, gone, "publish a LOAD at every start (protocol.md 5.8, 8)")]
    snapshot = next(each for each in harness.loads(since) if each.engine_started_ns not in old)
    problems: list[Problem] = load_problems(snapshot, session.key)
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
