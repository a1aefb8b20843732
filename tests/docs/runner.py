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
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from switchboard.text.default_tokenizer import ensure_default_tokenizer
from tests.docs.doc_stack import DocStack
from tests.docs.markdown_examples import Block, command_lines, console_steps
from tests.docs.output_match import mismatch, normalize
from tests.docs.probes import answers, probe_groups
from tests.docs.rewrite import DOC_PORTS, Rewrite
from tests.docs.shell import BashRun, run_bash, started_bash, stop_group
from tests.docs.static_check import REPO_ROOT, bash_syntax, check_line, simple_commands
from tests.integration.harness.curve_keys import free_gateway_listen
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
        self.other_ports = {port: free_port() for port in DOC_PORTS[2:-2]}
        # The gateway takes PORT and PORT+1: two free consecutive ports.
        gateway = int(free_gateway_listen().rpartition(":")[2])
        self.other_ports |= {7100: gateway, 7101: gateway + 1}
        #: The names ``file`` blocks wrote: later blocks find them in the scratch directory.
        self.files: list[str] = []
        # A model's tokenizer.json for the examples that name one (/models/...): the
        # built-in tokenizer's file, which is one (setup= copies it where the doc says).
        self.tokenizer_json = ensure_default_tokenizer(cache_dir)[1]

    def close(self) -> list[str]:
        problems = self.stack.close() if self.stack is not None else []
        shutil.rmtree(self.scratch, ignore_errors=True)
        return problems

    def _context(self, block: Block) -> tuple[Rewrite, dict[str, str], Path]:
        marker = block.marker
        assert marker is not None
        scratch_paths = marker.get("scratch").split(",") if marker.get("scratch") else []
        scratch_paths += self.files
        if marker.kind == "file":
            scratch_paths.append(marker.get("path"))
        env = {k: v for k, v in child_env().items() if not k.startswith("SWITCHBOARD_")}
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
        env["SWITCHBOARD_CACHE_DIR"] = str(self.cache_dir)
        env["DOCS_TOKENIZER_JSON"] = self.tokenizer_json
        # A file block starts no stack: what it writes is read by later blocks' commands.
        if marker.get("stack", "file") == "own" or marker.kind == "file":
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
        # env= is this block's alone (the defaults a doc relies on, as the test has them).
        for word in shlex.split(rewrite.command(marker.get("env"))):
            name, equals, value = word.partition("=")
            if not equals:
                raise ValueError(f"{block.where}: env= takes NAME=VALUE words, not {word!r}")
            env[name] = value
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
                "file": self._file,
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

    def _file(
        self, block: Block, rewrite: Rewrite, env: dict[str, str], cwd: Path, timeout: float
    ) -> list[str]:
        """``path=NAME``: the block's text, rewritten, becomes ``NAME`` in the scratch
        directory; later blocks' ``NAME`` is that file."""
        assert block.marker is not None
        name = block.marker.get("path")
        target = Path(rewrite.command(name))
        if not name or not target.is_relative_to(self.scratch):
            return [f"a file block names its file: path=NAME (got {name!r})"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rewrite.output(block.text) + "\n")
        self.files.append(name)
        return []

    def _serve(
        self, block: Block, rewrite: Rewrite, env: dict[str, str], cwd: Path, timeout: float
    ) -> list[str]:
        """Lines that only set variables (``export``, ``NAME=value``) run first, in every
        server's shell; every other line is a server. ``servers=together`` (the default):
        all start at once, and a ``make`` line of a block on the file's stack stands for
        that stack; ``servers=each``: one at a time, each probed and stopped before the
        next starts."""
        assert block.marker is not None
        marker = block.marker
        prelude, servers = "", []
        for line in command_lines(block.text):
            words = simple_commands(line)
            if not words or words[0][0] == "export":
                prelude += _materialize(rewrite.command(line), rewrite, cwd) + "\n"
            elif words[0][0] != "make" or marker.get("stack", "file") == "own":
                servers.append(_materialize(rewrite.command(line), rewrite, cwd))
        mode = marker.get("servers", "together")
        if mode not in ("together", "each"):
            return [f"servers={mode!r}: expected servers=together or servers=each"]
        try:
            groups = probe_groups(rewrite.command(marker.get("probe")), len(servers))
        except ValueError as error:
            return [str(error)]
        if not servers or not all(groups):
            return ["a serve block has a server line and names what to probe: probe=..."]
        if mode == "together":
            script = "".join(f"{server} &\n" for server in servers)
            probes = list(dict.fromkeys(probe for group in groups for probe in group))
            return self._probe(prelude + script, probes, env, cwd, timeout)
        problems = []
        for server, probes in zip(servers, groups, strict=True):
            found = self._probe(f"{prelude}{server} &\n", probes, env, cwd, timeout)
            problems += [f"{server}\n  {problem}" for problem in found]
        return problems

    def _probe(
        self, script: str, probes: list[str], env: dict[str, str], cwd: Path, timeout: float
    ) -> list[str]:
        """Start ``script`` (servers in the background), wait for every probe, then stop
        them all (SIGTERM, then SIGKILL after :data:`tests.docs.shell.STOP_S`): a server
        that needed SIGKILL is a problem (a stack's stop is bounded by its
        ``stop_grace_s``)."""
        with started_bash(script + "wait\n", env, cwd) as (process, output_path, _):
            problems = self._probed(process, output_path, probes, timeout)
            return problems + stop_group(process.pid)

    @staticmethod
    def _probed(
        process: subprocess.Popen[bytes], output_path: Path, probes: list[str], timeout: float
    ) -> list[str]:
        """Wait for each probe in turn, all within ``timeout`` s; the first that is not
        satisfied (or the servers' shell ending first) is the problem."""
        deadline = time.monotonic() + timeout
        for probe in probes:

            def answered(probe: str = probe) -> bool:
                if answers(probe, output_path):
                    return True
                if process.poll() is not None:
                    raise _ServerExited(f"exited {process.returncode}")
                return False

            try:
                wait_until(answered, max(0.0, deadline - time.monotonic()), probe, 0.2)
            except (PollTimeout, _ServerExited, ValueError) as error:
                output = output_path.read_text(errors="replace")
                return [f"{probe}: {error}; the servers' output:\n{_tail(output)}"]
        return []


class _ServerExited(Exception):
    """A serve block's bash ended: one of its servers did not keep running."""


def check_block(block: Block) -> list[str]:
    """Static checks of every command line of ``block`` (no process started)."""
    assert block.marker is not None
    cwd = REPO_ROOT / block.marker.get("cwd", ".")
    if block.marker.kind in ("output", "file"):
        return []
    if block.marker.kind == "console":
        lines = [step.command.replace("\\\n", " ") for step in console_steps(block.text)]
    else:
        lines = command_lines(block.text)
    parse = block.marker.kind != "console"
    problems = [problem for line in lines for problem in check_line(line, cwd, parse=parse)]
    syntax = bash_syntax("\n".join(lines))
    return problems + ([f"bash -n: {syntax}"] if syntax else [])


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
