"""The two stacks of ``switchboard bench engine`` and the streaming client both get.

:class:`ServerStack` is llama-cpp-python's own OpenAI server (``python -m
llama_cpp.server``, its ``[server]`` extra) on loopback, run with
``--interrupt_requests False``: by default a new request cuts off the one running,
which no concurrent client wants. Switchboard is ``switchboard up --engine llama-cpp``
(:class:`switchboard.bench.e2e_stack.Stack` with the llama engine's settings).
:func:`stream_completion` sends one streaming ``/v1/completions`` request to either and
returns what it saw as a :class:`~switchboard.bench.engine_stats.Stream`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Final

import httpx

from router_core.process import die_with_parent
from switchboard.bench.e2e_stack import HOST, free_port
from switchboard.bench.engine_stats import Stream
from switchboard.bench.procs import BenchError, log_tail

__all__ = ["ServerStack", "completion_body", "stream_completion"]

_READY_TIMEOUT_S: Final = 120.0
_STOP_TIMEOUT_S: Final = 10.0


class ServerStack:
    """``llama_cpp.server`` serving ``model`` as ``name`` with ``threads`` CPU threads and
    a context of ``n_ctx``; nothing runs before :meth:`launch`, :meth:`stop` is
    idempotent and leaves no process behind."""

    def __init__(self, model: Path, name: str, threads: int, n_ctx: int) -> None:
        self.port = 0
        self._argv = [
            *(sys.executable, "-m", "llama_cpp.server", "--model", str(model)),
            *("--model_alias", name, "--n_threads", str(threads)),
            *("--n_threads_batch", str(threads), "--n_ctx", str(n_ctx)),
            *("--interrupt_requests", "False", "--verbose", "False"),
        ]
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def launch(self) -> None:
        """Start the server and wait until it answers ``/v1/models``; BenchError if not."""
        self.port = free_port()
        parent = os.getpid()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self._proc = subprocess.Popen(
            [*self._argv, "--host", HOST, "--port", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,
            preexec_fn=lambda: die_with_parent(parent),  # noqa: PLW1509 (no threads yet)
        )
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BenchError(
                    f"llama_cpp.server exited ({self._proc.returncode}): {self._tail()}"
                )
            try:
                if httpx.get(f"{self.base_url}/v1/models", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise BenchError(f"llama_cpp.server: not serving after {_READY_TIMEOUT_S:.0f} s")

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server has used so far."""
        import psutil

        if self._proc is None:
            return 0.0
        times = psutil.Process(self._proc.pid).cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _tail(self) -> str:
        return log_tail(self._log)


def completion_body(model: str, prompt: str, max_tokens: int, usage: bool) -> dict[str, Any]:
    """A greedy streaming completion. For Switchboard (``usage``), with the final usage
    chunk; for the server, which has no ``stream_options`` (it streams one chunk per token
    instead), with its ``repeat_penalty`` off: it defaults to 1.1, which changes even a
    greedy choice."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
    }
    if usage:
        body["stream_options"] = {"include_usage": True}
    else:
        body["repeat_penalty"] = 1.0
    return body


async def stream_completion(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], timeout_s: float
) -> Stream:
    """Send ``body`` to ``url`` and read its stream. Tokens are the usage chunk's
    ``completion_tokens`` when there is one, else the chunks that carried a choice."""
    sent = time.perf_counter()
    first = last = None
    chunks, usage_tokens, text = 0, None, []
    try:
        async with client.stream("POST", url, json=body, timeout=timeout_s) as response:
            if response.status_code != 200:
                detail = (await response.aread()).decode(errors="replace")[:200]
                return Stream(sent, None, None, 0, "", f"status {response.status_code}: {detail}")
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if event.get("usage") and not event.get("choices"):
                    usage_tokens = event["usage"]["completion_tokens"]
                    continue
                for choice in event.get("choices") or ():
                    # The server's last chunk carries the finish reason and no token.
                    chunks += choice.get("finish_reason") is None or bool(choice.get("text"))
                    if choice.get("text"):
                        now = time.perf_counter()
                        first = first if first is not None else now
                        last = now
                        text.append(choice["text"])
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return Stream(sent, first, last, 0, "".join(text), f"{type(exc).__name__}: {exc}")
    tokens = usage_tokens if usage_tokens is not None else chunks
    return Stream(sent, first, last, tokens, "".join(text))
