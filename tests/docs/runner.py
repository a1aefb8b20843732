"""One doc file's examples, run in document order: :class:`FileRun`.

The blocks of a file share what a reader's terminal would: the variables earlier blocks
exported, and one real stack (started at the first block that needs it, see
:mod:`tests.docs.doc_stack`), so that a pause in one block is in the status the next one
shows. Each block's commands are rewritten first (:class:`tests.docs.rewrite.Rewrite`):
the test's ports, directories and token for the docs'. What each kind does is in the
test module's docstring; :meth:`FileRun.run` returns what went wrong, in words.
"""

from __future__ import annotations

import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.docs.doc_stack import DocStack
from tests.docs.markdown_examples import Block, command_lines, console_steps
from tests.docs.output_match import mismatch, normalize
from tests.docs.rewrite import DOC_PORTS, Rewrite
from tests.docs.shell import BashRun, run_bash, started_bash
from tests.docs.static_check import REPO_ROOT, bash_syntax, check_line, simple_commands
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import child_env
from tests.support.eventually import PollTimeout, wait_until

__all__ = ["FileRun", "check_block"]

#: A block's deadline unless its marker's ``timeout=`` says otherwise.
DEFAULT_TIMEOUT_S = 30.0
_STEP = "\x1eDOCS-STEP"
#: A run block's curl fails on an HTTP error, as the reader would notice one (unless the
#: doc's own -f/--fail says how).
_RUN_PRELUDE = """set -eo pipefail
curl() {
    local word
    for word in "$@"; do
        case $word in --fail*|-[!-]*f*) command curl "$@"; return;; esac
    done
    command curl --fail-with-body "$@"
}
"""


def _tail(text: str, limit: int = 3000) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


class FileRun:
    """The examples of one doc file, run one after the other; :meth:`close` at the end."""

    def __init__(self, start_stack: Callable[[], DocStack], cache_dir: Path) -> None:
        self.start_stack = start_stack
        self.cache_dir = cache_dir
        self.scratch = Path(tempfile.mkdtemp(prefix="docs-", dir="/tmp"))
        self.exported: dict[str, str] = {}
        self.stack: DocStack | None = None
        self.other_ports = {port: free_port() for port in DOC_PORTS[2:]}

    def close(self) -> list[str]:
        problems = self.stack.close() if self.stack is not None else []
        shutil.rmtree(self.scratch, ignore_errors=True)
        return problems

    def _context(self, block: Block) -> tuple[Rewrite, dict[str, str], Path]:
        marker = block.marker
        assert marker is not None
        scratch_paths = marker.get("scratch").split(",") if marker.get("scratch") else []
        env = {k: v for k, v in child_env().items() if not k.startswith("SWITCHBOARD_")}
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
        env["SWITCHBOARD_CACHE_DIR"] = str(self.cache_dir)
        if marker.get("stack", "file") == "own":
            ports = {8000: free_port(), 8001: free_port(), **self.other_ports}
            own_dir = self.scratch / f"own-{block.line}" / "sb"
            rewrite = Rewrite(ports, own_dir, self.scratch, "", scratch_paths)
        else:
            if self.stack is None:
                self.stack = self.start_stack()
            stack = self.stack
            ports = {8000: stack.port, 8001: stack.admin_port, **self.other_ports}
            rewrite = Rewrite(ports, stack.run_dir, self.scratch, stack.token, scratch_paths)
            # The default admin URL, and the $T the API examples use, stand for this stack's.
            env["SWITCHBOARD_ADMIN_URL"], env["T"] = stack.admin_url, stack.token
        env.update(self.exported)
        return rewrite, env, REPO_ROOT / marker.get("cwd", ".")

    def run(self, block: Block) -> list[str]:
        """Run ``block`` as its marker's kind says; what went wrong (nothing: [])."""
        assert block.marker is not None
        kind = block.marker.kind
        if kind == "check":
            return []
        rewrite, env, cwd = self._context(block)
        timeout = float(block.marker.get("timeout", str(DEFAULT_TIMEOUT_S)))
        problems = self._hook(block.marker.get("setup"), "setup", rewrite, env, cwd)
        if not problems:
            env.update(self.exported)
            runner = {
                "run": self._run,
                "console": self._console,
                "serve": self._serve,
                "output": self._output,
            }[kind]
            problems = runner(block, rewrite, env, cwd, timeout)
        problems += self._hook(block.marker.get("teardown"), "teardown", rewrite, env, cwd)
        return problems

    def _hook(
        self, script: str, name: str, rewrite: Rewrite, env: dict[str, str], cwd: Path
    ) -> list[str]:
        if not script:
            return []
        result = run_bash(
            "set -eo pipefail\n" + rewrite.command(script), env, cwd, DEFAULT_TIMEOUT_S
        )
        self.exported.update(result.exported)
        if result.status != 0:
            return [
                f"{name} {script!r} exited {result.status}:\n{_tail(result.output)}",
                *result.problems,
            ]
        return result.problems

    def _finished(self, result: BashRun, what: str) -> list[str]:
        self.exported.update(result.exported)
        problems = [f"{what}: {problem}" for problem in result.problems]
        if result.status != 0:
            problems.append(f"{what} exited {result.status}; its output:\n{_tail(result.output)}")
        return problems

    def _run(
        self, block: Block, rewrite: Rewrite, env: dict[str, str], cwd: Path, timeout: float
    ) -> list[str]:
        script = _materialize(rewrite.command(block.text), rewrite, cwd)
        return self._finished(run_bash(_RUN_PRELUDE + script, env, cwd, timeout), "the block")

    def _console(
        self, block: Block, rewrite: Rewrite, env: dict[str, str], cwd: Path, timeout: float
    ) -> list[str]:
        steps = console_steps(block.text)
        lines = ["exec 2>&1", "__status=0"]
        for index, step in enumerate(steps):
            lines.append(
                f"printf '\\n{_STEP} {index}\\n'; (exit $__status); {rewrite.command(step.command)}"
            )
            lines.append("__status=$?")
        lines.append(f"printf '\\n{_STEP} end\\n'")
        result = run_bash("\n".join(lines) + "\n", env, cwd, timeout)
        self.exported.update(result.exported)
        problems = list(result.problems)
        outputs = re.split(rf"\n{_STEP} \S+\n", result.output)[1:]
        if len(outputs) != len(steps) + 1:
            return [*problems, f"the console script stopped early:\n{_tail(result.output)}"]
        for step, output in zip(steps, outputs, strict=False):
            diff = mismatch(rewrite.output(step.expected), output)
            if diff is not None:
                problems.append(f"$ {step.command}\n{diff}")
        return problems

    def _output(
        self, block: Block, rewrite: Rewrite, env: dict[str, str], cwd: Path, timeout: float
    ) -> list[str]:
        """``of=serving``: the block is the stack's stdout (its serving line); ``of=log``:
        each line of the block is a line of the stack's log (stderr)."""
        assert self.stack is not None and block.marker is not None
        expected = rewrite.output(block.text)
        source = block.marker.get("of")
        if source == "serving":
            diff = mismatch(expected, self.stack.supervisor.stdout())
            return [] if diff is None else [f"the serving line:\n{diff}"]
        if source == "log":
            log = self.stack.supervisor.stderr()
            seen = set(normalize(log))
            absent = [line for line in normalize(expected) if line not in seen]
            return [f"not in the stack's log: {line}" for line in absent]
        return [f"output of={source!r}: expected of=serving or of=log"]

    def _serve(
        self, block: Block, rewrite: Rewrite, env: dict[str, str], cwd: Path, timeout: float
    ) -> list[str]:
        servers = [
            line for line in command_lines(block.text) if simple_commands(line)[0][0] != "make"
        ]
        script = "".join(
            f"{_materialize(rewrite.command(line), rewrite, cwd)} &\n" for line in servers
        )
        assert block.marker is not None
        probes = [rewrite.command(url) for url in block.marker.get("probe").split(",") if url]
        if not probes:
            return ["a serve block names what to probe: probe=URL[,URL...]"]
        with started_bash(script + "wait\n", env, cwd) as (process, output_path, _):
            deadline = time.monotonic() + timeout
            for probe in probes:

                def answered(probe: str = probe) -> bool:
                    if process.poll() is not None:
                        raise _ServerExited(f"exited {process.returncode}")
                    return _answers(probe)

                try:
                    wait_until(answered, max(0.0, deadline - time.monotonic()), probe, 0.2)
                except (PollTimeout, _ServerExited) as error:
                    output = output_path.read_text(errors="replace")
                    return [f"{probe}: {error}; the servers' output:\n{_tail(output)}"]
        return []


class _ServerExited(Exception):
    """A serve block's bash ended: one of its servers did not keep running."""


def check_block(block: Block) -> list[str]:
    """Static checks of every command line of ``block`` (no process started)."""
    assert block.marker is not None
    cwd = REPO_ROOT / block.marker.get("cwd", ".")
    if block.marker.kind == "output":
        return []
    if block.marker.kind == "console":
        lines = [step.command.replace("\\\n", " ") for step in console_steps(block.text)]
    else:
        lines = command_lines(block.text)
    parse = block.marker.kind != "console"
    problems = [problem for line in lines for problem in check_line(line, cwd, parse=parse)]
    syntax = bash_syntax("\n".join(lines))
    return problems + ([f"bash -n: {syntax}"] if syntax else [])


def _answers(probe: str) -> bool:
    """An ``http(s)://`` URL answering 200 (with ``URL~TEXT``: a body holding TEXT), or
    ``tcp:HOST:PORT`` accepting a connection."""
    if probe.startswith("tcp:"):
        host, _, port = probe.removeprefix("tcp:").rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
        except OSError:
            return False
        return True
    url, _, text = probe.partition("~")
    try:
        response = httpx.get(url, timeout=2.0, trust_env=False)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and text in response.text


def _materialize(script: str, rewrite: Rewrite, cwd: Path) -> str:
    """``script`` with each repo file it names that mentions a documented port replaced by
    a rewritten copy of the file's whole directory (so its relative paths still hold)."""
    for word in sorted(set(re.findall(r"[\w.-]+(?:/[\w.-]+)+", script)), key=len, reverse=True):
        source = (cwd / word).resolve()
        if not source.is_file() or not source.is_relative_to(REPO_ROOT) or ".venv" in source.parts:
            continue
        text = source.read_text(errors="replace")
        if "\0" in text or rewrite.output(text) == text:
            continue
        copy = rewrite.scratch / "files" / source.parent.relative_to(REPO_ROOT)
        if not copy.exists():
            shutil.copytree(source.parent, copy)
            for path in copy.rglob("*"):
                if path.is_file():
                    path.write_text(rewrite.output(path.read_text(errors="replace")))
        script = re.sub(
            rf"(?<![\w./-]){re.escape(word)}(?![\w./-])", str(copy / source.name), script
        )
    return script
