"""The pure part of ``switchboard bench engine``: figures per level, ratios, targets, tables.

No sockets, no processes. The clients hand over one :class:`Stream` per request and the
runner the wall time and CPU seconds of each level; everything reported (and the table
``docs/benchmarks.md`` holds, rendered from the committed JSON by :func:`doc_table`) is
computed here, so it is tested without a stack.

Definitions. Output tokens/s: the output tokens of the level's requests over its wall
time. Time to first token (TTFT): from sending a request to its first streamed text.
Inter-token latency (ITL): a request's mean gap between output tokens after the first,
``(last - first) / (tokens - 1)``; p50 and p99 are over the level's requests. CPU
seconds per request: the CPU (user + system) the whole stack's processes used during the
level, over its requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from switchboard.bench.e2e_stats import percentile

__all__ = [
    "CONCURRENCIES",
    "STACKS",
    "TARGETS",
    "Level",
    "Stream",
    "doc_table",
    "level_figures",
    "levels_from_json",
    "missed_targets",
    "ratios",
    "report_table",
]

#: Streaming clients at once, per level.
CONCURRENCIES: Final = (1, 8, 32)
#: The two stacks, by their key in the JSON: Switchboard, and llama-cpp-python's server.
STACKS: Final = ("switchboard", "server")
#: ``(key, bound, at least?)``: what ``bench engine`` holds the ratios to (issue 20).
TARGETS: Final = (
    ("llama_vs_server_c1", 0.9, True),
    ("llama_vs_server_c8", None, True),
    ("llama_vs_server_c32", 4.0, True),
    ("ttft_p99_vs_server_c32", 0.25, False),
)


@dataclass(frozen=True, slots=True)
class Stream:
    """One streamed request (``time.perf_counter`` seconds); ``first`` and ``last`` are
    when its first and last text arrived (None: none did); ``error`` is None when the
    stream ended complete."""

    sent: float
    first: float | None
    last: float | None
    tokens: int
    text: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Level:
    """The figures of one stack at one concurrency."""

    concurrency: int
    requests: int
    errors: int
    output_tokens: int
    wall_s: float
    tokens_per_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    cpu_s_per_request: float | None

    def as_json(self) -> dict[str, Any]:
        return {key: _rounded(value) for key, value in asdict(self).items()}


def _rounded(value: object) -> object:
    return round(value, 6) if isinstance(value, float) else value


def level_figures(
    concurrency: int, streams: Sequence[Stream], wall_s: float, cpu_s: float | None
) -> Level:
    """The :class:`Level` of ``streams`` sent ``concurrency`` at a time over ``wall_s``,
    the stack having used ``cpu_s`` CPU seconds (None: unknown)."""
    done = [s for s in streams if s.error is None and s.first is not None]
    tokens = sum(s.tokens for s in done)
    ttfts = [s.first - s.sent for s in done if s.first is not None]
    itls = [
        (s.last - s.first) / (s.tokens - 1)
        for s in done
        if s.first is not None and s.last is not None and s.tokens > 1
    ]
    return Level(
        concurrency=concurrency,
        requests=len(streams),
        errors=len(streams) - len(done),
        output_tokens=tokens,
        wall_s=wall_s,
        tokens_per_s=tokens / wall_s if wall_s > 0 else 0.0,
        ttft_p50_s=percentile(ttfts, 50),
        ttft_p99_s=percentile(ttfts, 99),
        itl_p50_s=percentile(itls, 50),
        itl_p99_s=percentile(itls, 99),
        cpu_s_per_request=cpu_s / len(streams) if cpu_s is not None and streams else None,
    )


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 3) if ours is not None and theirs else None


def ratios(levels: Mapping[str, Mapping[int, Level]]) -> dict[str, float | None]:
    """``llama_vs_server_c<N>`` (Switchboard's tokens/s over the server's) at each level,
    and ``ttft_p99_vs_server_c32`` (Switchboard's TTFT p99 over the server's); None where
    a level is missing or the server's figure is 0."""
    ours, theirs = levels["switchboard"], levels["server"]
    out: dict[str, float | None] = {}
    for concurrency in CONCURRENCIES:
        a, b = ours.get(concurrency), theirs.get(concurrency)
        out[f"llama_vs_server_c{concurrency}"] = _ratio(
            a.tokens_per_s if a else None, b.tokens_per_s if b else None
        )
    top = max(CONCURRENCIES)
    a, b = ours.get(top), theirs.get(top)
    out[f"ttft_p99_vs_server_c{top}"] = _ratio(
        a.ttft_p99_s if a else None, b.ttft_p99_s if b else None
    )
    return out


def missed_targets(figures: Mapping[str, float | None]) -> list[str]:
    """The targets ``figures`` miss (a missing figure misses), each as one phrase."""
    missed = []
    for key, bound, at_least in TARGETS:
        if bound is None:
            continue
        value = figures.get(key)
        if value is None or (value < bound if at_least else value > bound):
            sign = ">=" if at_least else "<="
            missed.append(f"{key} {value} (target {sign} {bound})")
    return missed


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _rows(levels: Mapping[str, Mapping[int, Level]]) -> list[str]:
    """Markdown rows: clients, stack, tokens/s, TTFT and ITL (ms), CPU s/request, errors."""
    names = {"switchboard": "Switchboard", "server": "llama_cpp.server"}
    rows = []
    for concurrency in CONCURRENCIES:
        for stack in STACKS:
            level = levels.get(stack, {}).get(concurrency)
            if level is None:
                continue
            cpu = level.cpu_s_per_request
            rows.append(
                f"| {concurrency} | {names[stack]} | {level.tokens_per_s:.0f} | "
                f"{_ms(level.ttft_p50_s)} | {_ms(level.ttft_p99_s)} | "
                f"{_ms(level.itl_p50_s)} | {_ms(level.itl_p99_s)} | "
                f"{'-' if cpu is None else f'{cpu:.2f}'} | {level.errors} |"
            )
    return rows


_HEAD: Final = (
    "| clients | stack | output tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms "
    "| CPU s/request | errors |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
)


def _ratio_lines(figures: Mapping[str, Any]) -> list[str]:
    lines = []
    for key, bound, at_least in TARGETS:
        value = figures.get(key)
        target = "" if bound is None else f" (target {'>=' if at_least else '<='} {bound})"
        lines.append(f"| `{key}` | {'-' if value is None else f'{value:.2f}'}{target} |")
    return lines


def _tables(levels: Mapping[str, Mapping[int, Level]], figures: Mapping[str, Any]) -> list[str]:
    ratio_head = ["", "| ratio | value |", "| --- | --- |"]
    return [*_HEAD, *_rows(levels), *ratio_head, *_ratio_lines(figures)]


def report_table(levels: Mapping[str, Mapping[int, Level]], figures: Mapping[str, Any]) -> str:
    """The run's report: the levels, the ratios against their targets, the verdict."""
    missed = missed_targets(figures)
    verdict = "all targets met" if not missed else "MISSED: " + "; ".join(missed)
    return "\n".join([*_tables(levels, figures), "", verdict])


def levels_from_json(results: Mapping[str, Any]) -> dict[str, dict[int, Level]]:
    """The levels of a ``bench engine --json`` file's contents."""
    return {
        stack: {int(c): Level(**level) for c, level in results["levels"][stack].items()}
        for stack in STACKS
    }


def doc_table(results: Mapping[str, Any]) -> str:
    """docs/benchmarks.md's engine table, from a ``bench engine --json`` file's contents."""
    return "\n".join(_tables(levels_from_json(results), results["figures"]))


if __name__ == "__main__":
    # python -m switchboard.bench.engine_stats [FILE]: the doc table of a --json file.
    import json
    import sys

    source = sys.argv[1] if len(sys.argv) > 1 else "docs/figures/bench_engine.json"
    with open(source, encoding="utf-8") as results:
        print(doc_table(json.load(results)))
