"""``switchboard engine-check`` against real engines: the built-in one, the llama.cpp one,
the Python and C examples pass (or fail exactly where they do not keep the protocol); a
stand-in engine that breaks one duty fails on exactly that duty's rows; ``--run-dir``
checks an engine started by hand; bad command lines are exit status 2."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from router_core.credentials import KEY_FILE, load_or_create
from router_core.endpoints import EngineEndpoints
from switchboard.engine_check.findings import DUTIES
from switchboard.text import load_tokenizer
from switchboard.text.vocab_file import write_vocab_file
from tests.integration.harness import missing

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PYTHON = shlex.quote(sys.executable)
#: The built-in engine's flags that take the contract's placeholders.
ENGINE_FLAGS = (
    "--inbound-endpoint {inbound} --events-endpoint {events} --outputs-endpoint {outputs} "
    "--key-file {key_file} --parent-pid {parent_pid}"
)
#: Seconds a whole engine-check run may take before the test gives up on it.
RUN_TIMEOUT_S = 120


def engine_check(
    switchboard_bin: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """Run ``switchboard engine-check --json ARGS`` from the repo; (exit status, document)."""
    done = subprocess.run(
        [switchboard_bin, "engine-check", "--json", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def processes_naming(text: str) -> list[int]:
    """The pids of this user's processes whose environment holds ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue  # gone, or not ours
    return found


def rows_with(document: dict[str, Any], status: str) -> set[str]:
    """The names of the duties whose status is ``status``."""
    return {duty["name"] for duty in document["duties"] if duty["status"] == status}


def assert_report(document: dict[str, Any]) -> None:
    """The document has one row per duty, in order, and every FAIL carries a fix."""
    assert [duty["name"] for duty in document["duties"]] == list(DUTIES)
    for duty in document["duties"]:
        assert (duty["status"] == "FAIL") == bool(duty["fix"]), duty


@pytest.fixture(scope="module")
def stand_in_tmpdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The (empty) TMPDIR of the stand-in engine's conforming run: engine-check makes its
    run dir there, and must leave it empty."""
    return tmp_path_factory.mktemp("stand-in-tmpdir")


@pytest.fixture(scope="module")
def conforming_reports(
    switchboard_bin: str, stand_in_tmpdir: Path
) -> dict[str, tuple[int, dict[str, Any]]]:
    """``engine-check --json`` of the built-in engine, the stand-in without a break and the
    Python example, side by side (a run mostly waits on quiet windows); by name."""
    commands = {
        "builtin": f"{PYTHON} -m switchboard.cli engine {ENGINE_FLAGS} --outputs-via direct",
        "stand-in": f"{PYTHON} -m tests.standins.broken_engine",
        "echo": f"{PYTHON} examples/echo_engine.py --tokens 64",
    }
    envs = {"stand-in": {**os.environ, "TMPDIR": str(stand_in_tmpdir)}}

    def check(name: str) -> tuple[int, dict[str, Any]]:
        return engine_check(switchboard_bin, "--engine-command", commands[name], env=envs.get(name))

    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        return dict(zip(commands, pool.map(check, commands), strict=True))


class TestConformingEngines:
    """Engines that keep the protocol pass; the examples fail only where they do not."""

    def test_builtin_engine(self, conforming_reports: dict[str, Any]) -> None:
        """The built-in engine passes every duty it can be driven to (EOS: not run)."""
        status, document = conforming_reports["builtin"]
        assert_report(document)
        assert status == 0 and document["ok"], document
        assert rows_with(document, "not run") == {"stop.eos"}

    def test_stand_in_engine_conforms(
        self, conforming_reports: dict[str, Any], stand_in_tmpdir: Path
    ) -> None:
        """The stand-in engine without --break passes every duty (the EOS one too), and
        engine-check leaves no run dir and no engine behind."""
        status, document = conforming_reports["stand-in"]
        assert_report(document)
        assert status == 0 and rows_with(document, "ok") == set(DUTIES), document
        assert list(stand_in_tmpdir.iterdir()) == []
        assert processes_naming(f"SWITCHBOARD_RUN_DIR={stand_in_tmpdir}") == []

    def test_echo_example(self, conforming_reports: dict[str, Any]) -> None:
        """examples/echo_engine.py, reading the engine-command variables, passes every duty
        (64 tokens a request, so that a request still runs when a pause arrives)."""
        status, document = conforming_reports["echo"]
        assert_report(document)
        assert status == 0 and rows_with(document, "ok") == set(DUTIES), document

    def test_c_example(self, switchboard_bin: str, tmp_path: Path) -> None:
        """examples/c_engine/echo_engine.c, built with cc, passes every duty."""
        source = REPO / "examples" / "c_engine"
        compiler = shutil.which("cc")
        if not (source / "echo_engine.c").exists() or compiler is None:
            missing("examples/c_engine/echo_engine.c and a C compiler")
        assert compiler is not None
        binary = tmp_path / "echo_engine"
        built = subprocess.run(
            [compiler, "-O2", "-o", str(binary), "echo_engine.c", "mpack_lite.c", "-lzmq"],
            cwd=source,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if built.returncode != 0 and "zmq.h" in built.stderr:
            missing("libzmq's headers (libzmq3-dev)")
        assert built.returncode == 0, built.stderr
        status, document = engine_check(switchboard_bin, "--engine-command", str(binary))
        assert_report(document)
        assert status == 0 and rows_with(document, "ok") == set(DUTIES), document

    def test_llama_engine(self, switchboard_bin: str, tmp_path: Path) -> None:
        """The llama.cpp engine on a tiny generated model of the built-in vocabulary passes
        (EOS: not run; EMBED answered with an abort row)."""
        # Found, not imported: the engine imports it, and importing it here leaves a
        # file open in the test process.
        if importlib.util.find_spec("llama_cpp") is None:
            missing("llama-cpp-python (make llama)")
        from switchboard.models import TINY, BuiltinVocab, build_model

        model = build_model(TINY, BuiltinVocab(), tmp_path)
        status, document = engine_check(
            switchboard_bin,
            "--engine-command",
            f"{PYTHON} -m switchboard.cli engine --backend llama-cpp --model {model} "
            f"--threads 1 {ENGINE_FLAGS}",
        )
        assert_report(document)
        assert status == 0, document
        assert rows_with(document, "not run") == {"stop.eos"}


#: Each break of the stand-in engine -> the rows that must fail (and no others).
BROKEN = {
    "no_load": {"load.first", "restart"},
    "no_engine_started_ns": {"load.first", "restart"},
    "no_secret_in_load": {"load.first", "restart"},
    "same_started_ns": {"restart"},
    "cumulative_output_ids": {"generate.rows"},
    "no_completion_tokens": {"generate.rows"},
    "wrong_owner": {"generate.rows"},
    "wrong_prompt_tokens": {"generate.usage"},
    "one_row_per_message": {"generate.batching"},
    "undecodable_rows": {"generate.rows"},
    "ignores_max_new_tokens": {"generate.max_new_tokens"},
    "ignores_stop_ids": {"stop.token_ids"},
    "ignores_stop_strings": {"stop.strings"},
    "ignores_eos": {"stop.eos"},
    "no_abort_row": {"abort.one", "abort.all"},
    "ignores_pause": {"pause.abort", "pause.retract", "pause.in_place"},
    # The engine link acknowledges an op older than the last applied by itself, with
    # the key, so pause.stale holds even for these two.
    "no_ack": {"pause.abort", "pause.retract", "pause.in_place", "continue"},
    "no_secret_in_ack": {"pause.abort", "pause.retract", "pause.in_place", "continue"},
    "no_embed_answer": {"embed"},
    "crashes_on_bad_frame": {"bad_frames"},
    "hangs_after_freeze_gc": {"freeze_gc"},
    "no_command_reply": {"engine_command"},
    "flushes_while_running": {"engine_command"},
}


#: engine-check runs of broken engines at a time: a run mostly waits (quiet windows,
#: deadlines), so a few side by side take little more than one. Eight use about one core
#: of two (four: 0.6 of one, 46 s for the 23; eight: 29 s).
PARALLEL_CHECKS = 8


@pytest.fixture(scope="module")
def broken_reports(switchboard_bin: str) -> dict[str, tuple[int, dict[str, Any]]]:
    """``engine-check --json`` of every broken engine, run a few at a time; by break."""

    def check(duty: str) -> tuple[int, dict[str, Any]]:
        return engine_check(
            switchboard_bin,
            "--timeout-s",
            "2",
            "--engine-command",
            f"{PYTHON} -m tests.standins.broken_engine --break {duty}",
        )

    with ThreadPoolExecutor(max_workers=PARALLEL_CHECKS) as pool:
        return dict(zip(sorted(BROKEN), pool.map(check, sorted(BROKEN)), strict=True))


class TestBrokenEngines:
    """A stand-in engine breaking one duty fails on exactly that duty's rows."""

    @pytest.mark.parametrize("duty", sorted(BROKEN))
    def test_fails_on_its_row(
        self, broken_reports: dict[str, tuple[int, dict[str, Any]]], duty: str
    ) -> None:
        """Exit status 1, FAIL on exactly the rows the break implies, each with a fix."""
        status, document = broken_reports[duty]
        assert_report(document)
        assert status == 1 and not document["ok"]
        assert rows_with(document, "FAIL") == BROKEN[duty], document

    def test_table(self, switchboard_bin: str) -> None:
        """Without --json: a table, one line per duty, the fix under a failure, a summary."""
        done = subprocess.run(
            [
                switchboard_bin,
                "engine-check",
                "--timeout-s",
                "2",
                "--engine-command",
                f"{PYTHON} -m tests.standins.broken_engine --break ignores_stop_ids",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].split() == ["duty", "result", "detail"]
        failing = [index for index, line in enumerate(lines) if " FAIL " in line]
        assert [lines[index].split()[0] for index in failing] == ["stop.token_ids"]
        assert lines[failing[0] + 1].strip().startswith("fix: end at the token that is it")
        assert lines[-1] == f"{len(DUTIES) - 1} ok, 1 FAIL, 0 not run"


class TestEngineThatCannotRun:
    """A command that cannot be run: load.first fails saying so, the rest are not run."""

    def test_not_found(self, switchboard_bin: str) -> None:
        """Exit 1; load.first names the exit status; the other rows are not run."""
        status, document = engine_check(
            switchboard_bin, "--engine-command", "/nonexistent/engine --flag"
        )
        assert_report(document)
        assert status == 1 and rows_with(document, "FAIL") == {"load.first"}
        assert rows_with(document, "not run") == set(DUTIES) - {"load.first"}
        first = document["duties"][0]["detail"]
        assert "exited with status 127" in first and "/nonexistent/engine" in first
        assert "No such file or directory" in document["last_lines"]


@pytest.fixture
def hand_started() -> Iterator[Path]:
    """The stand-in engine started by hand on a private run dir's endpoints."""
    run_dir = Path(tempfile.mkdtemp(prefix="sb-hand-", dir="/tmp"))
    key = load_or_create(run_dir / KEY_FILE)
    vocab = run_dir / "vocab.msgpack"
    write_vocab_file(load_tokenizer(), vocab)
    endpoints = EngineEndpoints.in_run_dir(run_dir)
    env = {
        **os.environ,
        "SWITCHBOARD_ENGINE_INBOUND": endpoints.inbound,
        "SWITCHBOARD_ENGINE_EVENTS": endpoints.events,
        "SWITCHBOARD_ENGINE_OUTPUTS": endpoints.outputs,
        "SWITCHBOARD_STACK_KEY": key,
        "SWITCHBOARD_VOCAB_FILE": str(vocab),
    }
    engine = subprocess.Popen(
        [sys.executable, "-m", "tests.standins.broken_engine"], cwd=REPO, env=env
    )
    try:
        yield run_dir
    finally:
        engine.terminate()
        try:
            engine.wait(timeout=10)
        finally:
            engine.kill()
            shutil.rmtree(run_dir, ignore_errors=True)


class TestRunDir:
    """``--run-dir``: an engine the user started, checked on that run dir's endpoints."""

    def test_checks_a_running_engine(self, switchboard_bin: str, hand_started: Path) -> None:
        """Every duty but restart (not run: it needs --engine-command) is ok, exit 0."""
        status, document = engine_check(switchboard_bin, "--run-dir", str(hand_started))
        assert_report(document)
        assert status == 0
        assert rows_with(document, "not run") == {"restart"}
        assert rows_with(document, "ok") == set(DUTIES) - {"restart"}


class TestUsage:
    """Bad command lines: one line on stderr, exit status 2."""

    @pytest.mark.parametrize(
        ("args", "says"),
        [
            ([], "give --engine-command CMD or --run-dir DIR"),
            (["--engine-command", "x", "--run-dir", "/tmp"], "not allowed with argument"),
            (["--engine-command", "engine {nope}"], "unknown placeholder {nope}"),
            (["--engine-command", "engine", "--timeout-s", "0"], "must be > 0"),
            (["--run-dir", "/nonexistent-sb"], "--run-dir /nonexistent-sb"),
        ],
    )
    def test_refused(self, switchboard_bin: str, args: list[str], says: str) -> None:
        """Each is refused before anything starts, naming what is wrong."""
        done = subprocess.run(
            [switchboard_bin, "engine-check", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done
        assert says in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
