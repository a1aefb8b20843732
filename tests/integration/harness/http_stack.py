"""A whole HTTP stack in one run directory, and what its outputs must be.

:func:`http_stack` starts ``switchboard router``, ``switchboard detok-router``, M
``switchboard detokenizer`` s, the built-in engine and N HTTP workers
(``python -m switchboard.cli worker``) sharing one free loopback port; it yields an
:class:`HttpStack` once every worker is serving, and on the way out stops everything with
SIGTERM and fails if a process exited badly or left a socket file behind. It is a plain
context manager so that a fixture of any scope can own it.

:class:`Predictor` computes every generated text and embedding from the built-in
engine's rules (:mod:`switchboard.engine.tokens`) and the default tokenizer, the same
way the engine and the detokenizers derive them.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import httpx
import zmq

from router_core.endpoints import worker_address
from switchboard.engine import embedding_for, generated_token, text_token_pool
from switchboard.text import Tokenizer
from tests.integration.harness.polling import ipc_path, socket_files, wait_until
from tests.integration.harness.processes import ManagedProcess, ProcessManager
from tests.integration.harness.reports import ReportCollector
from tests.integration.harness.stack import DetokRouterHandle, RouterHandle, Stack
from tests.support.zmq_context import ContextLeak, terminate

__all__ = [
    "MODEL",
    "HttpStack",
    "Predictor",
    "SseStream",
    "free_port",
    "generate_stream",
    "http_stack",
    "stream_problems",
]

#: The model name workers serve by default.
MODEL = "switchboard-sim"
#: The engine's embedding dimension (``SchedulerConfig.embedding_dimension``; no CLI flag).
EMBEDDING_DIMENSION = 64
#: Seven or so Python processes start on a noisy 2-core machine.
STARTUP_S = 60.0
#: Liveness and barriers loose enough that a worker busy with hundreds of streams on a
#: loaded machine is never declared dead; later flags override ``FAST_ROUTER_ARGS``.
ROUTER_ARGS = ("--heartbeat-timeout=10", "--barrier-timeout=10")
#: In-flight requests get this long after SIGTERM (teardown waits 10 s for a worker).
WORKER_GRACE_S = "5"
#: The stack alive now, if any (see :func:`http_stack`).
_LIVE: list[HttpStack] = []


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Predictor:
    """What the built-in engine (``--vocab-seed`` ``seed``) generates for each prompt."""

    tokenizer: Tokenizer
    seed: int = 0

    @cached_property
    def pool(self) -> tuple[int, ...]:
        """The ids the engine draws from (it builds the same pool from the same tokenizer)."""
        tok = self.tokenizer
        return text_token_pool(tok.vocab_size, tok.decode, tok.special_token_ids)

    def prompt_ids(self, prompt: str | Sequence[int]) -> list[int]:
        """The ids a worker sends for ``prompt`` (user text: special tokens not parsed)."""
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt, parse_special=False)
        return list(prompt)

    def token_ids(self, prompt: str | Sequence[int], count: int) -> list[int]:
        """The first ``count`` generated ids, by the token rule."""
        ids = self.prompt_ids(prompt)
        return [generated_token(self.pool, ids, i, self.seed) for i in range(count)]

    def text(self, prompt: str | Sequence[int], count: int) -> str:
        """The whole text of a ``count``-token generation."""
        return self.tokenizer.decode(self.token_ids(prompt, count))

    def embedding(self, prompt: str | Sequence[int]) -> list[float]:
        """The embedding of ``prompt``, by the embedding rule."""
        return embedding_for(self.prompt_ids(prompt), EMBEDDING_DIMENSION, self.seed)

    def distinct_prompts(self, count: int, lengths: Sequence[int], stem: str) -> list[str]:
        """``count`` prompts whose texts (prompt ``i`` generating ``lengths[i]`` tokens)
        all differ, so a response delivered to the wrong client cannot go unnoticed."""
        prompts: list[str] = []
        seen: set[str] = set()
        candidate = 0
        while len(prompts) < count:
            prompt = f"{stem} {candidate}: tell me about request {candidate * 7}"
            candidate += 1
            text = self.text(prompt, lengths[len(prompts)])
            if text not in seen:
                seen.add(text)
                prompts.append(prompt)
        return prompts


@dataclass
class SseStream:
    """One ``/generate`` stream as a client saw it, filled in while it arrives."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: The JSON payload of every ``data:`` event before ``[DONE]``, in order.
    events: list[dict[str, Any]] = field(default_factory=list)
    #: ``time.monotonic()`` when each event arrived.
    arrivals: list[float] = field(default_factory=list)
    done: bool = False
    #: Lines that are not ``data: <json>`` events, and events after ``[DONE]``.
    malformed: list[str] = field(default_factory=list)
    #: The JSON body of a refused request.
    error: Any = None

    @property
    def completion_tokens(self) -> int:
        return int(self.events[-1]["meta_info"]["completion_tokens"]) if self.events else 0

    @property
    def text(self) -> str:
        return str(self.events[-1]["text"]) if self.events else ""


async def generate_stream(
    client: httpx.AsyncClient, body: dict[str, Any], into: SseStream | None = None
) -> SseStream:
    """POST ``body`` to ``/generate`` with ``stream: true`` and read the stream to its end."""
    seen = into if into is not None else SseStream()
    async with client.stream("POST", "/generate", json={**body, "stream": True}) as response:
        seen.status = response.status_code
        seen.headers = dict(response.headers)
        if response.status_code != 200:
            seen.error = json.loads(await response.aread())
            return seen
        async for line in response.aiter_lines():
            if not line:
                continue
            if not line.startswith("data: ") or seen.done:
                seen.malformed.append(line)
            elif line == "data: [DONE]":
                seen.done = True
            else:
                seen.events.append(json.loads(line.removeprefix("data: ")))
                seen.arrivals.append(time.monotonic())
    return seen


def stream_problems(
    seen: SseStream, rid: str, text: str, tokens: int, finish: dict[str, Any] | None = None
) -> list[str]:
    """What is wrong with a ``/generate`` stream that should have read ``text`` (cumulative
    SGLang events, all for ``rid``), ``tokens`` tokens and ``finish`` (length by default),
    ending ``data: [DONE]``; empty when nothing is."""
    finish = finish if finish is not None else {"type": "length", "length": tokens}
    if seen.status != 200:
        return [f"{rid}: status {seen.status}: {seen.error}"]
    problems = [f"{rid}: malformed line {line!r}" for line in seen.malformed]
    if not seen.done:
        problems.append(f"{rid}: no [DONE]")
    if not seen.events or any("meta_info" not in event for event in seen.events):
        return [*problems, f"{rid}: events without meta_info: {seen.events[-3:]}"]
    ids = {event["meta_info"]["id"] for event in seen.events}
    if ids != {rid}:
        problems.append(f"{rid}: events of other requests {ids - {rid}}")
    texts = [event["text"] for event in seen.events]
    if any(not later.startswith(earlier) for earlier, later in itertools.pairwise(texts)):
        problems.append(f"{rid}: text is not cumulative: {texts}")
    reasons = [event["meta_info"]["finish_reason"] for event in seen.events]
    if reasons[-1] != finish or any(reason is not None for reason in reasons[:-1]):
        problems.append(f"{rid}: finish reasons {reasons}, want one {finish} at the end")
    if seen.text != text:
        problems.append(f"{rid}: text {seen.text!r}, predicted {text!r}")
    if finish["type"] == "length" and seen.completion_tokens != tokens:
        problems.append(f"{rid}: completion_tokens {seen.completion_tokens}, want {tokens}")
    return problems


@dataclass
class HttpStack:
    """A running stack: its processes, the workers' shared port, and the router's control."""

    run_dir: Path
    port: int
    processes: ProcessManager
    router: RouterHandle
    detok_router: DetokRouterHandle
    detokenizers: list[ManagedProcess]
    engine: ManagedProcess
    workers: dict[str, ManagedProcess] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ctl(self, command: str, **args: Any) -> Any:
        """One control command to the tokenizer router."""
        return self.router.ctl(command, **args)

    def assert_running(self) -> None:
        """Fail, with the dead process's log, if any process of the stack has exited."""
        for proc in self.processes.processes:
            proc.assert_running()

    def worker_views(self) -> dict[str, dict[str, Any]]:
        """The router's registry entries, by worker id."""
        return {view["worker_id"]: view for view in self.ctl("list_workers")}

    def wait_worker_state(self, worker_id: str, state: str, timeout: float = 15.0) -> Any:
        """Wait until the router reports ``worker_id`` in ``state``; return its entry."""

        def reached() -> dict[str, Any] | None:
            self.assert_running()
            view = self.worker_views().get(worker_id)
            return view if view is not None and view["state"] == state else None

        return wait_until(
            reached, timeout, lambda: f"{worker_id} {state}: {self.worker_views().get(worker_id)}"
        )

    def worker_infos(self, timeout: float = 15.0) -> dict[str, dict[str, Any]]:
        """Every live worker's ``/get_server_info``, asked over fresh connections until
        each has answered (the kernel picks the worker of each new connection)."""
        infos: dict[str, dict[str, Any]] = {}
        wanted = {wid for wid, proc in self.workers.items() if proc.alive()}
        headers = {"Connection": "close"}
        with httpx.Client(base_url=self.base_url, headers=headers, timeout=10.0) as client:

            def all_answered() -> bool:
                info = client.get("/get_server_info").raise_for_status().json()
                infos[info["worker_id"]] = info
                return wanted <= infos.keys()

            wait_until(all_answered, timeout, lambda: f"{wanted} to answer; got {set(infos)}", 0)
        return infos

    def dump_logs(self) -> str:
        return self.processes.dump_logs()


@contextlib.contextmanager
def http_stack(
    switchboard_bin: str,
    log_dir: Path,
    *,
    workers: int = 2,
    detokenizers: int = 2,
    outputs_via: Literal["workers", "router"] = "workers",
    engine_args: Sequence[str] = (),
    worker_args: Sequence[str] = (),
) -> Iterator[HttpStack]:
    """Start a whole stack (see the module docstring); stop and check it on exit.

    Teardown fails if a process ignored SIGTERM, exited non-zero or by itself, left a
    child running, or left a socket file in the run directory. Logs stay in ``log_dir``.
    """
    if _LIVE:
        # The first stack's teardown would take the second's processes for leftovers.
        raise RuntimeError("one HttpStack at a time: end the other one's scope first")
    run_dir = Path(tempfile.mkdtemp(prefix="sb-http-", dir="/tmp"))
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    context.setsockopt(zmq.LINGER, 0)
    processes = ProcessManager(log_dir)
    # Stack wants a report collector; this stack starts no stand-ins that would use it.
    reports = ReportCollector(context, f"ipc://{run_dir}/reports")
    base = Stack(run_dir, processes, reports, context, switchboard_bin)
    try:
        stack = _start(
            base,
            workers=workers,
            detokenizers=detokenizers,
            outputs_via=outputs_via,
            engine_args=engine_args,
            worker_args=worker_args,
        )
        _LIVE.append(stack)
        yield stack
    except BaseException:
        print(processes.dump_logs())
        raise
    finally:
        _LIVE.clear()
        base.close()
        problems = _stop_workers(processes)
        problems += processes.shutdown()
        reports.close()
        try:
            terminate(context)
        except ContextLeak as leak:
            problems.append(str(leak))
        leftover = socket_files(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
    if leftover:
        problems.append(f"socket files left in the run dir: {leftover}")
    assert not problems, "\n".join(problems) + f"\nlogs in {log_dir}"


def _stop_workers(processes: ProcessManager) -> list[str]:
    """SIGTERM every worker at once and check each: exited 0 in time, socket file removed."""
    workers = [p for p in processes.processes if p.name.startswith("worker-") and p.alive()]
    for proc in workers:
        proc.stopped_by_sigterm = True
        proc.send_signal(signal.SIGTERM)
    problems = []
    for proc in workers:
        try:
            code = proc.popen.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            problems.append(f"{proc.name} ignored SIGTERM for 10 s and was killed")
            continue
        if code != 0:
            problems.append(f"{proc.name} exited {code} on SIGTERM:\n{proc.log_tail()}")
            continue
        leftover = [str(path) for path in proc.binds if path.exists()]
        if leftover:
            problems.append(f"{proc.name} left socket files after SIGTERM: {leftover}")
        # Checked here; the process manager then neither re-checks nor judges the status.
        proc.expect_clean_exit = False
    return problems


def _start(
    base: Stack,
    *,
    workers: int,
    detokenizers: int,
    outputs_via: str,
    engine_args: Sequence[str],
    worker_args: Sequence[str],
) -> HttpStack:
    router = base.start_router(*ROUTER_ARGS)
    detok_router = base.start_detok_router(detokenizers)
    detok_procs = [
        base.start_detokenizer(index, detokenizers, "--outputs-via", outputs_via)
        for index in range(detokenizers)
    ]
    engine = base.start_builtin_engine(*engine_args, wait_live=router)
    stack = HttpStack(
        run_dir=base.run_dir,
        port=free_port(),
        processes=base.processes,
        router=router,
        detok_router=detok_router,
        detokenizers=detok_procs,
        engine=engine,
    )
    for index in range(workers):
        worker_id = f"w{index}"
        argv = [
            sys.executable,
            "-m",
            "switchboard.cli",
            "worker",
            "--run-dir",
            str(base.run_dir),
            "--worker-id",
            worker_id,
            "--host",
            "127.0.0.1",
            "--port",
            str(stack.port),
            "--parent-pid",
            str(os.getpid()),
            "--graceful-timeout",
            WORKER_GRACE_S,
            *worker_args,
        ]
        binds = [ipc_path(worker_address(base.run_dir, worker_id))]
        stack.workers[worker_id] = base.processes.spawn(f"worker-{worker_id}", argv, binds)

    def all_serving() -> bool:
        stack.assert_running()
        views = stack.worker_views()
        return all(views.get(wid, {}).get("state") == "serving" for wid in stack.workers)

    wait_until(all_serving, STARTUP_S, lambda: f"every worker serving: {stack.ctl('list_workers')}")
    return stack
