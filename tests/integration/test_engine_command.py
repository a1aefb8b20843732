"""``switchboard up --engine-command``: a user's engine started, readied, watched,
restarted and stopped by the supervisor as the built-in one is.

Every stack here runs the real supervisor and processes; the engine is
``examples/echo_engine.py`` as a user would run it (no ``--run-dir``: the
``SWITCHBOARD_ENGINE_*`` variables), or a shell command that fails as a broken engine
would. The non-Python engine behind the same flag is ``tests/integration/test_c_engine.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from switchboard.text import load_tokenizer
from switchboard.text.vocab_file import read_vocab_file
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT, wait_until
from tests.integration.harness.sse import StreamThread, generate_stream
from tests.integration.harness.supervisor import (
    Stacks,
    Supervisor,
    gone,
    refuse,
    stack_env,
    up_argv,
)

ECHO = f"{shlex.quote(sys.executable)} examples/echo_engine.py --tokens 64"
PROMPTS = (
    "Hello there, wörld 😀",
    "The quick brown fox jumps over the lazy dog.",
    "日本語のテキスト",
)


def _ports() -> tuple[str, ...]:
    return ("--port", str(free_port()), "--admin-port", str(free_port()))


def _engine(supervisor: Supervisor) -> psutil.Process:
    """The engine process: the supervisor's direct child running the echo engine."""
    for process in supervisor.children():
        if any(word.endswith("echo_engine.py") for word in process.cmdline()) and not gone(process):
            return process
    raise AssertionError("no engine process under the supervisor")


def _streamed_texts(url: str, prompts: tuple[str, ...]) -> list[str]:
    """Each prompt streamed through /generate for as many tokens as it has (the echo
    engine echoes the prompt, so each text must come back exactly)."""
    codec = load_tokenizer(None)

    async def run() -> list[str]:
        async with httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client:
            seen = await asyncio.gather(
                *(
                    generate_stream(
                        client,
                        {
                            "text": text,
                            "sampling_params": {"max_new_tokens": len(codec.encode(text))},
                        },
                    )
                    for text in prompts
                )
            )
        # An error event (no text) is a failed request: the caller may try again.
        assert all(each.done and "text" in each.events[-1] for each in seen), seen
        return [each.text for each in seen]

    return asyncio.run(run())


class TestEchoEngineCommand:
    def test_serves_exact_text_pauses_restarts_and_stops(self, stacks: Stacks) -> None:
        """The echo engine under --engine-command streams each prompt back exactly through
        the detokenizers, acknowledges a pause, is restarted after a SIGKILL, and is gone
        with the stack's socket files after SIGTERM."""
        supervisor = stacks.start("--engine-command", ECHO)
        assert "engine command python" in supervisor.stdout()
        assert _streamed_texts(supervisor.url, PROMPTS) == list(PROMPTS)

        vocab = read_vocab_file(supervisor.run_dir / "vocab.msgpack")
        assert vocab.tokens == read_vocab_file_of_default()

        ctl = [sys.executable, "-m", "switchboard.cli", "ctl", "--run-dir", str(supervisor.run_dir)]
        paused = subprocess.run(
            [*ctl, "pause", "mode=in_place"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert paused.returncode == 0 and '"engine"' in paused.stdout, paused
        resumed = subprocess.run(
            [*ctl, "continue"], check=False, capture_output=True, text=True, timeout=30
        )
        assert resumed.returncode == 0 and '"engine"' in resumed.stdout, resumed

        first = _engine(supervisor)
        first.send_signal(signal.SIGKILL)
        wait_until(lambda: "restarted engine" in supervisor.stderr(), 30, "the engine's restart")
        second = wait_until(lambda: _try_engine(supervisor, first.pid), 30, "a new engine")
        assert second.pid != first.pid
        texts = wait_until(lambda: _texts_or_none(supervisor.url), 30, "text after the restart")
        assert texts == list(PROMPTS)

        run_dir = supervisor.run_dir
        assert supervisor.terminate() == 0
        assert gone(second)
        assert not run_dir.exists()

    def test_toml_with_working_dir_and_environment(self, stacks: Stacks, tmp_path: Path) -> None:
        """engine_command, engine_cwd and [engine_env] in the TOML file: the command runs
        in that directory with that variable, through sh, and its words reach it with the
        placeholders replaced; its output lines pass through the supervisor's log."""
        config = tmp_path / "stack.toml"
        command = (
            "sh -c 'echo \"cwd=$(pwd) greeting=$GREETING inbound={inbound} "
            'env=$SWITCHBOARD_ENGINE_INBOUND"; '
            f"exec {shlex.quote(sys.executable)} echo_engine.py --tokens 64'"
        )
        config.write_text(
            f"engine_command = '''{command}'''\n"
            f'engine_cwd = "{REPO_ROOT / "examples"}"\n'
            '[engine_env]\nGREETING = "hello from toml"\n'
        )
        supervisor = stacks.start("--config", str(config))
        assert _streamed_texts(supervisor.url, PROMPTS[:1]) == list(PROMPTS[:1])
        inbound = f"ipc://{supervisor.run_dir}/engine"
        line = next(line for line in supervisor.stderr().splitlines() if "greeting=" in line)
        assert line.split(": ", 1)[1] == (
            f"cwd={REPO_ROOT / 'examples'} greeting=hello from toml inbound={inbound} env={inbound}"
        ), line
        assert line.startswith("engine[")


def _ctl(run_dir: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "ctl", "--run-dir", str(run_dir), *words],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_echo_engine_answers_flush_cache(stacks: Stacks) -> None:
    """``switchboard ctl flush_cache`` through the echo engine's COMMAND_REPLY: ok with 0
    tokens dropped while idle, CONFLICT naming the request while one runs unpaused, ok
    while it is paused in place; the request is then aborted by its id."""
    # 8000 tokens at 5 ms a step (within the workers' 8192-token context): the request runs
    # until it is aborted.
    supervisor = stacks.start("--engine-command", ECHO.replace("--tokens 64", "--tokens 8000"))
    idle = _ctl(supervisor.run_dir, "flush_cache")
    assert idle.returncode == 0, idle.stderr
    assert json.loads(idle.stdout) == {"flushed": True, "dropped_tokens": 0}

    body = {
        "text": PROMPTS[1],
        "rid": "flush-echo-1",
        "sampling_params": {"max_new_tokens": 8000},
    }
    stream = StreamThread(supervisor.url, body).start()
    wait_until(stream.started, 30, "the long stream's first event")
    busy = _ctl(supervisor.run_dir, "flush_cache")
    assert busy.returncode == 1, busy
    assert busy.stderr.startswith("switchboard ctl: CONFLICT: ") and "flush-echo-1" in busy.stderr
    paused = _ctl(supervisor.run_dir, "pause", "mode=in_place")
    assert paused.returncode == 0, paused.stderr
    held = _ctl(supervisor.run_dir, "flush_cache")
    assert held.returncode == 0 and json.loads(held.stdout)["flushed"], held.stderr
    for words in (("continue",), ("abort", "rid=flush-echo-1")):
        done = _ctl(supervisor.run_dir, *words)
        assert done.returncode == 0, done.stderr
    seen = stream.finish(30)
    assert seen.events[-1]["meta_info"]["finish_reason"]["type"] == "abort", seen.events[-1]


def read_vocab_file_of_default() -> list[bytes]:
    codec = load_tokenizer(None)
    return [codec.token_bytes(token_id) for token_id in range(codec.vocab_size)]


def _try_engine(supervisor: Supervisor, not_pid: int) -> psutil.Process | None:
    try:
        process = _engine(supervisor)
    except AssertionError:
        return None
    return process if process.pid != not_pid else None


def _texts_or_none(url: str) -> list[str] | None:
    try:
        return _streamed_texts(url, PROMPTS)
    except (AssertionError, httpx.HTTPError):
        return None


class TestFailingEngineCommand:
    def test_exit_at_start_fails_once_with_the_command_and_its_lines(
        self, cache_dir: Path, tmp_path: Path
    ) -> None:
        """An engine that exits before its first load snapshot fails ``up`` at once with
        exit status 1, naming the command and its last output lines; it is started once,
        never restarted in a loop."""
        command = (
            "sh -c 'echo starting up; echo \"fatal: cannot open model /no/such.gguf\" >&2; exit 3'"
        )
        started = time.monotonic()
        result = subprocess.run(
            up_argv("--engine-command", command, *_ports()),
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=stack_env(cache_dir),
            timeout=90,
            check=False,
        )
        assert result.returncode == 1, result.stderr
        assert time.monotonic() - started < 60
        error = result.stderr[result.stderr.index("startup failed") :]
        assert "engine (pid " in error and "exited during startup (exit status 3)" in error
        assert f"command: {command}" in error
        assert "\n    starting up\n    fatal: cannot open model /no/such.gguf" in error
        assert "restarted engine" not in result.stderr
        assert result.stderr.count("started engine (pid") == 1

    def test_engine_without_a_load_snapshot_is_named_at_the_deadline(self, cache_dir: Path) -> None:
        """A command that runs but never publishes its load is not ready: ``up`` gives up
        at the startup deadline saying what the engine must send."""
        # sleep is a child of sh (not exec'd: a command follows it): stopping the engine
        # signals its whole process group.
        command = "sh -c 'echo waiting forever; sleep 60; echo never'"
        result = subprocess.run(
            up_argv("--engine-command", command, "--startup-timeout-s", "8", *_ports()),
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=stack_env(cache_dir),
            timeout=90,
            check=False,
        )
        assert result.returncode == 1, result.stderr
        assert "not ready before the startup deadline: engine" in result.stderr
        assert "no LOAD snapshot from it with the stack key" in result.stderr
        assert "    waiting forever" in result.stderr
        # Nothing of the engine is left, its own child included.
        leftovers = [
            p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "60"]
        ]
        assert leftovers == []

    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [
            (["--engine-command", "no-such-engine-binary --x"], "no-such-engine-binary not found"),
            (["--engine-command", "./nope/engine"], "./nope/engine is not an executable file"),
            (["--engine-command", "python e.py {inboud}"], "unknown placeholder {inboud}"),
            (["--engine-command", "python 'unclosed"], "cannot split into words"),
            (["--engine-command", "python e.py", "--model", "m.gguf"], "only for engines sim"),
            (["--engine-command", "python e.py", "--step-time-s", "0.1"], "only for engines sim"),
            (["--engine", "command"], "needs engine_command"),
            (["--engine-env", '{"A": "1"}'], "engine_env: only for an engine command"),
            (
                ["--engine-command", "python e.py", "--engine-env", "not json"],
                "must be a JSON object",
            ),
            (
                [
                    "--engine-command",
                    "python e.py",
                    "--engine-env",
                    '{"SWITCHBOARD_STACK_KEY": "x"}',
                ],
                "set by the supervisor",
            ),
        ],
    )
    def test_bad_settings_are_refused_in_one_line(
        self, cache_dir: Path, arguments: list[str], expected: str
    ) -> None:
        assert expected in refuse(cache_dir, *arguments)


def test_engine_dies_with_a_killed_supervisor(cache_dir: Path, tmp_path: Path) -> None:
    """SIGKILL of the supervisor takes the engine command with it: the parent-death
    signal is set before the command's exec, whatever the engine does itself."""
    supervisor = Supervisor(
        up_argv("--engine-command", ECHO, *_ports()),
        stack_env(cache_dir),
        tmp_path,
    )
    try:
        supervisor.wait_serving()
        engine = _engine(supervisor)
        os.kill(supervisor.popen.pid, signal.SIGKILL)
        supervisor.popen.wait(timeout=10)
        wait_until(lambda: gone(engine), 10, "the engine to die with its supervisor")
    finally:
        supervisor.shutdown()  # reaps what is left; the claim is the wait above


def test_token_rows_sent_straight_to_the_workers_are_a_502(stacks: Stacks) -> None:
    """An engine that sends its token batches through the tokenizer router's outputs,
    past every detokenizer, gets its clients a 502 naming the mistake, streamed or
    not, never an empty text with status 200."""
    command = f"{ECHO} --run-dir {{run_dir}} --outputs-via router"
    supervisor = stacks.start("--engine-command", command)
    body = {"text": "hello", "sampling_params": {"max_new_tokens": 2}}
    answer = httpx.post(f"{supervisor.url}/generate", json=body, timeout=30)
    assert answer.status_code == 502, answer.text
    assert "sent token ids (TOKEN_BATCH) to this worker" in answer.text

    async def stream() -> dict[str, object]:
        async with httpx.AsyncClient(base_url=supervisor.url, timeout=30) as client:
            seen = await generate_stream(client, body)
        assert seen.done and seen.status == 200
        return seen.events[-1]

    last = asyncio.run(stream())
    assert "text" not in last and "TOKEN_BATCH" in str(last), last
