"""The pure arithmetic of the end-to-end benchmark: percentiles, window summaries, CPU shares.

No sockets, no processes: the load generator hands over :class:`RequestRecord` values and
the stack probe hands over CPU samples, and everything reported is computed here, so it is
tested without a stack.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ROLES",
    "ROUTING_ROLES",
    "CpuSample",
    "LoadSummary",
    "RequestRecord",
    "cpu_by_role",
    "cpu_per_process",
    "percentile",
    "role_of",
    "routing_share",
    "summarize_window",
]

#: The processes of a stack, by the ``switchboard`` subcommand each runs.
ROLES: Final = (
    "supervisor",
    "admin",
    "router",
    "detok-router",
    "detokenizer",
    "engine",
    "worker",
)

#: The routing processes, whose share of the stack's CPU the benchmark reports.
ROUTING_ROLES: Final = frozenset({"router", "detok-router"})

_SUBCOMMAND_ROLES: Final = {
    "up": "supervisor",
    "admin": "admin",
    "router": "router",
    "detok-router": "detok-router",
    "detokenizer": "detokenizer",
    "engine": "engine",
    "worker": "worker",
}


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One streamed request as the load generator saw it (``time.perf_counter`` seconds).

    ``first`` is when the first body bytes of the stream (the first event, which carries
    the first token) arrived, None if none did. ``tokens`` is the final event's
    ``completion_tokens``. ``error`` is None for a request that ended with ``[DONE]``
    after a final event without an error.
    """

    started: float
    first: float | None
    finished: float
    tokens: int
    error: str | None = None


@dataclass(frozen=True)
class LoadSummary:
    """What the requests that finished inside the measured window add up to."""

    window_s: float
    requests: int
    requests_per_s: float
    output_tokens_per_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p99_s: float | None
    #: Failed requests that ended inside the window.
    errors_in_window: int
    #: Failed requests of the whole run, warm-up included.
    errors_total: int
    #: Up to three distinct error messages, to say what went wrong.
    error_samples: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CpuSample:
    """One process's cumulative CPU time (user + system seconds) at one instant."""

    role: str
    cpu_s: float


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks.

    The same rule as numpy's default: p50 of ``[1, 2, 3, 4]`` is 2.5. None if empty.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within [0, 100], got {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize_window(records: Iterable[RequestRecord], start: float, end: float) -> LoadSummary:
    """Rates and latencies of the requests that finished within ``[start, end)``.

    A request counts where it finishes: its tokens all count in the window it ends in,
    so a closed loop's rates are unbiased over a window many requests long.
    """
    if end <= start:
        raise ValueError("the window must end after it starts")
    done: list[RequestRecord] = []
    errors_in_window = errors_total = 0
    samples: list[str] = []
    for record in records:
        inside = start <= record.finished < end
        if record.error is not None:
            errors_total += 1
            errors_in_window += inside
            if record.error not in samples and len(samples) < 3:
                samples.append(record.error)
        elif inside:
            done.append(record)
    window_s = end - start
    ttft = [r.first - r.started for r in done if r.first is not None]
    e2e = [r.finished - r.started for r in done]
    return LoadSummary(
        window_s=window_s,
        requests=len(done),
        requests_per_s=len(done) / window_s,
        output_tokens_per_s=sum(r.tokens for r in done) / window_s,
        ttft_p50_s=percentile(ttft, 50),
        ttft_p99_s=percentile(ttft, 99),
        e2e_p50_s=percentile(e2e, 50),
        e2e_p99_s=percentile(e2e, 99),
        errors_in_window=errors_in_window,
        errors_total=errors_total,
        error_samples=tuple(samples),
    )


def role_of(cmdline: Sequence[str]) -> str:
    """The stack role of a process from its command line, ``"other"`` if it is none.

    The role is the first argument after the interpreter that names a ``switchboard``
    subcommand (``python -m switchboard.cli engine --run-dir ...`` is the engine). Flag
    values that happen to name one (``--outputs-via router``) come after it.
    """
    for argument in cmdline[1:]:
        role = _SUBCOMMAND_ROLES.get(argument)
        if role is not None:
            return role
    return "other"


def cpu_by_role(
    before: Mapping[int, CpuSample], after: Mapping[int, CpuSample]
) -> tuple[dict[str, float], list[int]]:
    """CPU seconds each role used between two samples, and the pids not in both.

    Only processes present in both samples are counted; a pid in one sample only (a
    process that died or was restarted in between) is returned so the run can be flagged,
    since its CPU time inside the window is unknown.
    """
    used: dict[str, float] = {}
    for pid, sample in after.items():
        earlier = before.get(pid)
        if earlier is None or earlier.role != sample.role:
            continue
        used[sample.role] = used.get(sample.role, 0.0) + max(0.0, sample.cpu_s - earlier.cpu_s)
    unmatched = sorted(set(before) ^ set(after))
    return used, unmatched


def cpu_per_process(
    before: Mapping[int, CpuSample], after: Mapping[int, CpuSample]
) -> dict[str, list[float]]:
    """CPU seconds of each process present in both samples, per role, largest first.

    Shows whether the processes of a role share the work (detokenizers picked by
    hash, each connection taken by whichever worker accepts it first from the shared
    listening socket).
    """
    used: dict[str, list[float]] = {}
    for pid, sample in after.items():
        earlier = before.get(pid)
        if earlier is not None and earlier.role == sample.role:
            used.setdefault(sample.role, []).append(max(0.0, sample.cpu_s - earlier.cpu_s))
    return {role: sorted(seconds, reverse=True) for role, seconds in used.items()}


def routing_share(used: Mapping[str, float]) -> float | None:
    """CPU of the routing processes over CPU of every stack process; None if none was used."""
    total = sum(used.values())
    if total <= 0:
        return None
    return sum(seconds for role, seconds in used.items() if role in ROUTING_ROLES) / total
