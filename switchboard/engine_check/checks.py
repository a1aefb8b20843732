"""The duties of load snapshots, generation and the stop rules, one function each.

Each takes the :class:`~switchboard.engine_check.session.Session` and returns its rows'
:class:`~switchboard.engine_check.findings.Finding` list. A check that needs the first
run (``generate.rows``) to have conformed is ``not run`` otherwise: its comparisons
would say nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from router_core.wire import Kind
from switchboard.engine_check.findings import Finding, failed, not_run, ok
from switchboard.engine_check.rows import FIXES, RequestRun, shared_messages
from switchboard.engine_check.session import Baseline, Session
from switchboard.engine_check.verdicts import (
    Problem,
    echoes_prompt,
    interval_problems,
    load_problems,
    pick_stop_id,
    pick_stop_string,
)

__all__ = [
    "UNDECODABLE_FIX",
    "check_batching",
    "check_generate",
    "check_load",
    "check_max_new_tokens",
    "check_stops",
    "row_problems",
    "run_problems",
    "same_run",
    "verdict",
]

#: The fix of a message from the engine that the real decoder refuses.
UNDECODABLE_FIX = (
    "frame every message as [header, payloads...]: the canonical header, one payload per "
    "row of a batch, payloads that decode as their kind (protocol.md 2, 4)"
)
_NEEDS_ROWS = "needs generate.rows to conform (runs are compared id for id)"


def verdict(name: str, problems: Sequence[Problem], detail: str) -> Finding:
    """ok with ``detail``, or FAIL with the first problem (and how many more)."""
    if not problems:
        return ok(name, detail)
    seen, fix = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return failed(name, seen + more, fix)


def run_problems(run: RequestRun, timeout_s: float) -> list[Problem]:
    """A missing finish: what every check asks of its requests (the rows' own shape is
    ``generate.rows``'s duty, :func:`row_problems`)."""
    if run.finished:
        return []
    return [
        (
            f"{run.rid}: no finishing row within {timeout_s:g} s ({run.rows} rows)",
            FIXES["no_finish"],
        )
    ]


def row_problems(run: RequestRun) -> list[Problem]:
    """The breaches of sections 3.6, 3.7 and 4 that ``run``'s rows show."""
    return [(breach.seen, breach.fix) for breach in run.breaches]


def same_run(run: RequestRun, expected: Sequence[int], what: str) -> list[Problem]:
    """A problem if ``run``'s ids are not ``expected`` (greedy runs must repeat)."""
    if run.ids == list(expected):
        return []
    at = next(
        (i for i, (a, b) in enumerate(zip(run.ids, expected, strict=False)) if a != b),
        min(len(run.ids), len(expected)),
    )
    return [
        (
            f"{what}: {len(run.ids)} ids differ from the same request alone ({len(expected)} "
            f"ids) from token {at}",
            "make greedy decoding (temperature 0) depend on the request alone, not on "
            "batching, timing or pauses (engine.md 3)",
        )
    ]


def check_load(session: Session) -> list[Finding]:
    """``load.first``: a LOAD within the bound, with the key, engine_started_ns and a sane
    max_running; ``load.interval``: a second one, step and taken_ns not going back."""
    harness, bound = session.harness, session.timeout_s
    harness.wait(lambda: bool(harness.loads()) or bool(session.engine_gone()), bound)
    if not harness.loads():
        gone = session.engine_gone()
        first = failed(
            "load.first",
            f"no LOAD: {gone}" if gone else f"no LOAD on events within {bound:g} s",
            "connect a PUSH to events (SWITCHBOARD_ENGINE_EVENTS) and publish a LOAD at "
            "start and every 100 ms to 1 s (protocol.md 3.5, 5.8)",
        )
        return [first, not_run("load.interval", "no first LOAD")]
    snapshot = harness.loads()[0]
    first = verdict(
        "load.first",
        load_problems(snapshot, session.key),
        f"max_running {snapshot.max_running}, engine_started_ns {snapshot.engine_started_ns}",
    )
    if not harness.wait(lambda: len(harness.loads()) >= 2, bound):
        return [
            first,
            failed(
                "load.interval",
                f"one LOAD, then none within {bound:g} s",
                "publish LOAD at least once per engine timeout (10 s), typically every "
                "100 ms to 1 s (protocol.md 5.8, 8)",
            ),
        ]
    second = harness.loads()[1]
    return [
        first,
        verdict(
            "load.interval",
            interval_problems(snapshot, second),
            f"steps {snapshot.step} -> {second.step}",
        ),
    ]


def check_generate(session: Session) -> list[Finding]:
    """``generate.rows`` and ``generate.usage`` on one greedy GENERATE."""
    prompt = session.prompt()
    params = session.greedy()
    before = len(session.harness.inbox.undecodable)
    run = session.run("first", prompt, params)
    # A message that does not decode says most: it may be where the rows went.
    problems: list[Problem] = [
        (
            f"a message on {bad.socket} does not decode: {bad.reason}",
            UNDECODABLE_FIX,
        )
        for bad in session.harness.inbox.undecodable[before:]
    ]
    problems += row_problems(run) + run_problems(run, session.timeout_s)
    if run.kinds - {Kind.TOKEN_BATCH, Kind.STR_BATCH}:
        kinds = sorted(kind.name for kind in run.kinds)
        problems.append(
            (
                f"a GENERATE answered with {', '.join(kinds)} rows",
                "answer a GENERATE with TOKEN_BATCH rows (or STR_BATCH) (protocol.md 2.4)",
            )
        )
    session.silent = run.rows == 0
    rows = verdict("generate.rows", problems, f"{run.rows} rows, {len(run.ids)} ids, {run.finish}")
    if problems:
        return [rows, not_run("generate.usage", "generate.rows failed")]
    session.baseline = Baseline(prompt, params, run)
    session.rows_ok = True
    usage: list[Problem] = []
    if run.completion_tokens != len(run.ids):
        usage.append(
            (
                f"completion_tokens {run.completion_tokens}, {len(run.ids)} ids sent",
                "count every output id in completion_tokens (protocol.md 3.6)",
            )
        )
    if run.prompt_tokens != len(prompt):
        usage.append(
            (
                f"prompt_tokens {run.prompt_tokens}, the prompt has {len(prompt)} ids",
                "send prompt_tokens = len(input_ids) in every row (protocol.md 3.6)",
            )
        )
    detail = f"completion_tokens {run.completion_tokens}, prompt_tokens {run.prompt_tokens}"
    return [rows, verdict("generate.usage", usage, detail)]


def check_batching(session: Session, count: int = 8) -> list[Finding]:
    """``generate.batching``: ``count`` requests at once share messages, each as alone."""
    name = "generate.batching"
    if not session.rows_ok:
        return [not_run(name, _NEEDS_ROWS)]
    prompts = [session.prompt(f"Request {index} of the batch asks for") for index in range(count)]
    params = session.greedy()
    alone = [session.run("alone", prompt, params) for prompt in prompts]
    rids = [session.generate("batch", prompt, params) for prompt in prompts]
    together = session.wait_finished(rids)
    problems: list[Problem] = []
    for run, single in zip(together, alone, strict=True):
        problems += row_problems(run) + run_problems(run, session.timeout_s)
        problems += same_run(run, single.ids, run.rid)
    shared = shared_messages(rids, session.harness.output_messages())
    if not shared:
        problems.append(
            (
                f"{count} concurrent requests: no message carried rows of two of them",
                "send each step's rows of every running request as one batch message, "
                "one row per request (protocol.md 4.1)",
            )
        )
    return [verdict(name, problems, f"{shared} shared messages, texts as alone")]


def check_max_new_tokens(session: Session) -> list[Finding]:
    """``generate.max_new_tokens``: finish length N after exactly N ids."""
    name = "generate.max_new_tokens"
    base = session.baseline
    if base is None or len(base.run.ids) < 2:
        return [not_run(name, _NEEDS_ROWS if base is None else "the first run made < 2 ids")]
    limit = min(3, len(base.run.ids) - 1)
    run = session.run("length", base.prompt, session.greedy(limit))
    problems = run_problems(run, session.timeout_s)
    if run.finish != {"type": "length", "length": limit} or len(run.ids) != limit:
        problems.append(
            (
                f"max_new_tokens {limit}: {len(run.ids)} ids, finish {run.finish}",
                'stop after max_new_tokens ids with {"type": "length", "length": N} '
                "(protocol.md 3.2, 3.6)",
            )
        )
    return [verdict(name, problems, f"length {limit} after {len(run.ids)} ids")]


def _stop_run(
    session: Session, base: Baseline, end: int, matched: object, **extra: object
) -> tuple[RequestRun, list[Problem]]:
    run = session.run("stop", base.prompt, session.greedy(base.params.max_new_tokens, **extra))
    problems = run_problems(run, session.timeout_s)
    expected = base.run.ids[: end + 1]
    asked = ", ".join(f"{field} {json.dumps(value)}" for field, value in extra.items())
    if run.ids != expected or run.finish != {"type": "stop", "matched": matched}:
        problems.append(
            (
                f"{asked}: {len(run.ids)} ids (expected {len(expected)}), finish {run.finish}",
                f"end at the token that {'completes' if isinstance(matched, str) else 'is'} "
                f'it, with {{"type": "stop", "matched": {json.dumps(matched)}}}, that token '
                "counted in output_ids (protocol.md 3.2; switchboard/engine/stopping.py)",
            )
        )
    elif run.completion_tokens != len(expected):
        problems.append(
            (
                f"completion_tokens {run.completion_tokens} after {len(expected)} ids",
                "count the stop token in completion_tokens, as SGLang (protocol.md 3.6)",
            )
        )
    return run, problems


def check_stops(session: Session) -> list[Finding]:
    """``stop.token_ids``, ``stop.strings`` and ``stop.eos``, from the first run's output."""
    base = session.baseline
    if base is None:
        return [
            not_run(name, _NEEDS_ROWS) for name in ("stop.token_ids", "stop.strings", "stop.eos")
        ]
    findings: list[Finding] = []
    picked = pick_stop_id(base.run.ids)
    if picked is None:
        findings.append(
            not_run("stop.token_ids", "the first run has no id unique enough to stop on")
        )
    else:
        end, token = picked
        _, problems = _stop_run(session, base, end, token, stop_token_ids=[token])
        findings.append(
            verdict("stop.token_ids", problems, f"stopped at id {token} after {end + 1} ids")
        )
    chosen = pick_stop_string(base.run.ids, session.codec.decode)
    if chosen is None:
        findings.append(not_run("stop.strings", "the first run's text has no piece to stop on"))
    else:
        end, text = chosen
        run, problems = _stop_run(session, base, end, text, stop=[text])
        if run.stop_holdbacks - {len(text) - 1}:
            problems.append(
                (
                    f"stop_holdback {sorted(run.stop_holdbacks)} for stop {text!r}",
                    "send stop_holdback = the longest stop string's length - 1 (protocol.md 3.6)",
                )
            )
        held = "" if run.stop_holdbacks else "; no stop_holdback (the detokenizer's default)"
        findings.append(
            verdict("stop.strings", problems, f"stopped at {text!r} after {end + 1} ids{held}")
        )
    findings.append(_check_eos(session, base))
    return findings


def _check_eos(session: Session, base: Baseline) -> Finding:
    name, eos = "stop.eos", session.codec.eos_token_id
    if eos is None:
        return not_run(name, "the vocabulary has no EOS")
    if not echoes_prompt(base.prompt, base.run.ids) or len(base.prompt) < 4:
        return not_run(
            name, "the engine does not echo its prompt: engine-check cannot make it emit EOS"
        )
    prompt = [*base.prompt[:2], eos, *base.prompt[2:]]
    stopped = session.run("eos", prompt, session.greedy(8))
    problems = run_problems(stopped, session.timeout_s)
    if stopped.ids != prompt[:3] or stopped.finish != {"type": "stop", "matched": eos}:
        problems.append(
            (
                f"EOS {eos} as the 3rd id: {len(stopped.ids)} ids, finish {stopped.finish}",
                f'stop on the vocabulary\'s EOS ({{"type": "stop", "matched": {eos}}}) unless '
                "ignore_eos (protocol.md 3.2; the vocabulary file's eos_token_id)",
            )
        )
    ignored = session.run("eos", prompt, session.greedy(8, ignore_eos=True))
    problems += run_problems(ignored, session.timeout_s)
    if len(ignored.ids) <= 3:
        problems.append(
            (
                f"ignore_eos: {len(ignored.ids)} ids, finish {ignored.finish}",
                "with ignore_eos, keep generating past EOS (protocol.md 3.2)",
            )
        )
    return verdict(name, problems, f"stopped at EOS {eos}; ignore_eos went on")
