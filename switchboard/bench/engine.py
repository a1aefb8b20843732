"""``switchboard bench engine``: Switchboard with the llama.cpp engine against llama-cpp-python's
own OpenAI server, on the same generated model, side by side in one run.

Both stacks serve the bench model (``switchboard models build --size bench``; ``--quick``:
the tiny one) with the same CPU threads, the same prompts and the same ``max_tokens``,
greedy, to streaming ``/v1/completions`` clients at 1, 8 and 32 at once; the stacks run
one after the other, never together. Reported per stack and level (definitions in
:mod:`switchboard.bench.engine_stats`): output tokens/s, time to first token p50/p99,
inter-token latency p50/p99 and CPU seconds per request; the throughput ratios
``llama_vs_server_c1|c8|c32`` and ``ttft_p99_vs_server_c32``, against their targets; a
PNG of tokens/s against clients beside the JSON. The server runs with
``--interrupt_requests False`` (see :mod:`switchboard.bench.engine_stacks`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from switchboard.bench.e2e_stack import Stack, StackConfig
from switchboard.bench.engine_stacks import ServerStack, completion_body, stream_completion
from switchboard.bench.engine_stats import (
    CONCURRENCIES,
    Level,
    Stream,
    level_figures,
    missed_targets,
    ratios,
    report_table,
)
from switchboard.bench.procs import BenchError

__all__ = ["EngineBenchConfig", "run_engine_bench"]

#: Prompts, each sent in turn; about 10 to 20 tokens of the model's vocabulary.
PROMPTS: Final = (
    "The quick brown fox jumps over the lazy dog",
    "Once upon a time, in a land far away",
    "Switchboard routes requests between workers and one engine",
    "A stream paused and continued gives the same tokens",
    "The operator opens the console and drains a worker",
    "Prometheus scrapes the admin app every fifteen seconds",
    "Greedy decoding picks the most likely token at every step",
    "Two cores, one engine, many HTTP workers",
)


@dataclass(frozen=True)
class EngineBenchConfig:
    """What one run measures."""

    size: str = "bench"
    max_tokens: int = 64
    #: Both stacks' CPU threads: every CPU this process may use, as llama.cpp defaults.
    threads: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))
    n_ctx: int = 4096
    workers: int = 2
    #: Requests per level: this many per client, at least ``min_requests``.
    requests_per_client: int = 2
    min_requests: int = 8
    request_timeout_s: float = 300.0

    def requests(self, concurrency: int) -> int:
        return max(self.min_requests, self.requests_per_client * concurrency)


QUICK: Final = EngineBenchConfig(
    size="tiny", max_tokens=16, n_ctx=1024, min_requests=4, requests_per_client=1
)


def _model(size: str) -> Path:
    from switchboard.models import SPECS, BuiltinVocab, build_model

    return build_model(SPECS[size], BuiltinVocab())


async def _level(
    base_url: str, model: str, config: EngineBenchConfig, concurrency: int, usage: bool
) -> tuple[list[tuple[str, Stream]], float]:
    """Send the level's requests, ``concurrency`` at a time; each stream with its prompt,
    and the wall time."""
    count = config.requests(concurrency)
    queue = list(range(count))
    url = f"{base_url}/v1/completions"
    streams: list[tuple[str, Stream]] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits) as client:
        warm = completion_body(model, PROMPTS[0], 4, usage)
        await stream_completion(client, url, warm, config.request_timeout_s)

        async def one_client() -> None:
            while queue:
                prompt = PROMPTS[queue.pop() % len(PROMPTS)]
                body = completion_body(model, prompt, config.max_tokens, usage)
                stream = await stream_completion(client, url, body, config.request_timeout_s)
                streams.append((prompt, stream))

        loop = asyncio.get_running_loop()
        began = loop.time()
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        return streams, loop.time() - began


#: One stack's run: its figures per level, and the texts of each level's streams.
Run = tuple[dict[int, Level], dict[int, dict[str, set[str]]]]


def comparable(text: str) -> str:
    """``text`` without U+FFFD: where a model emits bytes that are not UTF-8, Switchboard
    writes the replacement character and llama_cpp.server drops them."""
    return text.replace("\ufffd", "")


def same_text(
    ours: dict[int, dict[str, set[str]]], theirs: dict[int, dict[str, set[str]]]
) -> list[int]:
    """``[same, of]``: the (level, prompt) pairs where every stream of both stacks gave
    one text. Greedy on one model, the two differ only where the model emits bytes that
    are not UTF-8: llama_cpp.server then drops characters and generates past
    ``max_tokens`` until the text decodes, Switchboard writes U+FFFD (as Hugging Face's
    decode does) and stops at ``max_tokens``; a sampling default left on (the server's
    ``repeat_penalty`` 1.1) would show here at once."""
    pairs = [(c, p) for c, by in ours.items() for p in by]
    same = sum(1 for c, p in pairs if len(ours[c][p]) == 1 and ours[c][p] == theirs[c].get(p))
    return [same, len(pairs)]


def _measure(
    base_url: str, model: str, config: EngineBenchConfig, usage: bool, cpu: Callable[[], float]
) -> Run:
    levels, texts = {}, {}
    for concurrency in CONCURRENCIES:
        before = cpu()
        sent, wall_s = asyncio.run(_level(base_url, model, config, concurrency, usage))
        streams = [stream for _, stream in sent]
        levels[concurrency] = level_figures(concurrency, streams, wall_s, cpu() - before)
        by_prompt: dict[str, set[str]] = {}
        for prompt, stream in sent:
            by_prompt.setdefault(prompt, set()).add(comparable(stream.text))
        texts[concurrency] = by_prompt
        errors = [s.error for s in streams if s.error]
        if errors:
            print(
                f"  {concurrency} clients: {len(errors)} errors, first: {errors[0]}",
                file=sys.stderr,
            )
    return levels, texts


def _switchboard(model: Path, name: str, config: EngineBenchConfig) -> Run:
    engine_args = (
        *("--engine", "llama-cpp", "--model", str(model), "--threads", str(config.threads)),
        *("--context-size", str(config.n_ctx), "--sequences", "32"),
    )
    stack = Stack(StackConfig(workers=config.workers, engine_args=engine_args, name="switchboard"))
    try:
        stack.launch()
        stack.wait_serving()

        def cpu() -> float:
            return sum(sample.cpu_s for sample in stack.cpu_sample().values())

        return _measure(f"http://127.0.0.1:{stack.port}", name, config, True, cpu)
    finally:
        stack.stop()


def _server(model: Path, name: str, config: EngineBenchConfig) -> Run:
    server = ServerStack(model, name, config.threads, config.n_ctx)
    try:
        server.launch()
        return _measure(server.base_url, name, config, False, server.cpu_s)
    finally:
        server.stop()


def _plot(levels: dict[str, dict[int, Level]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    labels = {"switchboard": "Switchboard (llama.cpp engine)", "server": "llama_cpp.server"}
    for stack, by_level in levels.items():
        xs = sorted(by_level)
        axes.plot(xs, [by_level[x].tokens_per_s for x in xs], marker="o", label=labels[stack])
    axes.set_xscale("log", base=2)
    axes.set_xticks(list(CONCURRENCIES), [str(c) for c in CONCURRENCIES])
    axes.set_xlabel("concurrent streaming clients")
    axes.set_ylabel("output tokens/s")
    axes.set_title("bench engine: tokens/s against clients")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def results_json(
    config: EngineBenchConfig, levels: dict[str, dict[int, Level]], same_text: list[int]
) -> dict[str, Any]:
    """The ``--json`` file's contents."""
    return {
        "suite": "engine",
        "config": {**config.__dict__, "server": "llama_cpp.server --interrupt_requests False"},
        "figures": ratios(levels),
        "prompts_same_text": {"same": same_text[0], "of": same_text[1]},
        "levels": {s: {str(c): lv.as_json() for c, lv in by.items()} for s, by in levels.items()},
    }


def run_engine_bench(quick: bool, json_path: str | None) -> int:
    """Run the suite; 0 when every target is met (a quick run only reports), else 1."""
    config = QUICK if quick else EngineBenchConfig()
    try:
        model = _model(config.size)
    except ImportError as exc:
        print(
            f"switchboard bench engine: needs the llama extra ({exc.name} is missing)",
            file=sys.stderr,
        )
        return 2
    name = model.name.removesuffix(".gguf")
    print(f"model {model.name}; {config.threads} thread(s), max_tokens {config.max_tokens}")
    try:
        ours, theirs = _switchboard(model, name, config), _server(model, name, config)
    except BenchError as exc:
        print(f"switchboard bench engine: {exc}", file=sys.stderr)
        return 1
    levels = {"switchboard": ours[0], "server": theirs[0]}
    same = same_text(ours[1], theirs[1])
    results = results_json(config, levels, same)
    print(report_table(levels, results["figures"]))
    print(f"prompts with the same text from both stacks: {same[0]} of {same[1]}")
    if json_path:
        path = Path(json_path)
        path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        _plot(levels, path.with_suffix(".png"))
        print(f"wrote {path} and {path.with_suffix('.png')}")
    return 0 if quick or not missed_targets(results["figures"]) else 1
