"""The docs test: every shell example in the docs is marked, names what exists, and runs.

Every fenced block of every Markdown file (:data:`DOC_FILES`) whose language is ``sh``,
``bash``, ``shell`` or ``console``, or that holds a ``switchboard`` or ``curl`` command
line, must be preceded by a marker line saying how it is tested
(:mod:`tests.docs.markdown_examples`)::

    <!-- example: KIND [stack=own] [setup="..."] [teardown="..."] [cwd=DIR] [env="N=V ..."]
                       [probe=...] [servers=each] [scratch=PATH,...] [path=NAME]
                       [timeout=S] [reason="..."] -->

The kinds:

``run``
    The block runs for real, in bash (``set -eo pipefail``, the venv's ``bin`` first on
    ``PATH``; ``curl`` fails on an HTTP error), and must exit 0.
``console``
    Lines starting ``$ `` are commands, the lines after each its expected output
    (stdout and stderr together). Each command runs and its output must match the doc's
    after :func:`tests.docs.output_match.normalize` (numbers, times, durations, ids and
    tokens become placeholders, spacing collapses; a JSON answer compares as JSON): a
    change of wording, columns, rows or fields fails, another pid does not. The exit
    status is part of the output where the doc shows ``$ echo $?``.
``serve``
    Each command is a server (a terminal of its own), except lines that only set
    variables (``export``, ``NAME=value``), which every server's shell runs first. All
    servers start in the background, every ``probe=`` must be satisfied within the
    timeout (:mod:`tests.docs.probes`: an HTTP 200, a TCP or Unix socket accepting, a
    text in the servers' output), then they are stopped. With ``servers=each`` they run
    one at a time instead, each with its own probes (``probe=A|B``: ``A`` for the first
    line, ``B`` for the second) and its own timeout, stopped before the next starts (for
    alternatives on one port). On the file's stack a ``make run`` line stands for that
    stack; in a ``stack=own`` block it runs.
``file``
    Not a command but a file the doc shows (a ``stack.toml``): its text, rewritten,
    becomes ``path=NAME`` in the file's scratch directory, and later blocks' ``NAME`` is
    that file.
``output``
    Not a command but what the stack printed, for a plain block showing it:
    ``of=serving`` compares the block with the stack's serving line (as ``console``
    does), ``of=log`` wants each of its lines (normalized) among the stack's log lines.
``check``
    Not run (``reason=`` says why: it takes minutes, needs docker or npm and the
    network, or is the suite itself); still checked as every block is, below.

Every block of every kind is also checked statically (:mod:`tests.docs.static_check`):
``bash -n``; each ``switchboard`` line parsed by the real argparse parser; each ``make``
target defined; each ``python -m`` module importable with the flags its ``--help``
lists; each repository path existing.

Blocks run in document order within a file, sharing the variables earlier blocks
exported and one real ``switchboard up`` (two workers, built-in engine, default
tokenizer; free loopback ports; started at the first block that needs it). Before a
block runs, the docs' ports (:data:`tests.docs.rewrite.DOC_PORTS`: 8000, 8001, 9090,
4318, ...), ``/tmp/sb`` (the stack's run directory), other ``/tmp/NAME`` paths (a scratch
directory) and token placeholders (``…``, ``$T``) become the test's
(:mod:`tests.docs.rewrite`), and so does a ``/tmp/switchboard-XXXXXXXX`` run directory,
for the stack's own; ``SWITCHBOARD_ADMIN_URL`` is the stack's admin app, standing for the
default. ``stack=own`` blocks start no stack: they get fresh ports and a run directory of
their own, and every process they leave in the background is stopped at the end
(SIGTERM; one that needs SIGKILL fails the test). ``setup=``/``teardown=`` are hidden
commands run before and after the block; ``env=`` sets variables for the block alone,
rewritten like its commands (``env="SWITCHBOARD_PORT=8000"``: a default port, as the
test has it). ``$DOCS_TOKENIZER_JSON`` is a real ``tokenizer.json`` (the built-in one),
for the setup of examples that name a model's (``/models/NAME``).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.doc_stack import start_stack
from tests.docs.markdown_examples import Block, command_lines, extract
from tests.docs.runner import FileRun, check_block
from tests.docs.static_check import REPO_ROOT, simple_commands
from tests.integration.harness.polling import missing


def _markdown_files() -> tuple[str, ...]:
    """Every Markdown file of the repository (README.md, docs/*.md, deploy/README.md,
    dashboards/README.md today), outside hidden and installed directories."""
    found = []
    for path in REPO_ROOT.rglob("*.md"):
        parts = path.relative_to(REPO_ROOT).parts
        if not any(
            p.startswith(".") or p in ("node_modules", "build") or p.endswith(".egg-info")
            for p in parts
        ):
            found.append(str(path.relative_to(REPO_ROOT)))
    return tuple(sorted(found, key=lambda name: (name != "README.md", name)))


#: The Markdown files whose examples are held to the code.
DOC_FILES = _markdown_files()


def examples(doc: str) -> list[Block]:
    return extract(doc, (REPO_ROOT / doc).read_text()).examples()


def _runs(doc: str) -> bool:
    return any(block.marker is not None and block.marker.kind != "check" for block in examples(doc))


@pytest.mark.parametrize("doc", DOC_FILES)
def test_every_example_is_marked(doc: str) -> None:
    """Every shell example of the file has a marker, and every marker a block."""
    document = extract(doc, (REPO_ROOT / doc).read_text())
    unmarked = [
        f"{block.where}: ```{block.language} block without an <!-- example: KIND --> line"
        for block in document.examples()
        if block.marker is None
    ]
    assert not [*document.problems, *unmarked], "\n".join([*document.problems, *unmarked])


@pytest.mark.parametrize("doc", DOC_FILES)
def test_examples_name_what_exists(doc: str) -> None:
    """Every command of every example is valid bash, and the subcommands, flags, make
    targets, modules and paths it names exist."""
    problems = [
        f"{block.where}: {problem}"
        for block in examples(doc)
        if block.marker is not None
        for problem in check_block(block)
    ]
    assert not problems, "\n".join(problems)


def _missing_programs(block: Block) -> list[str]:
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    programs = {words[0] for line in command_lines(block.text) for words in simple_commands(line)}
    return sorted(p for p in programs if "/" not in p and not _known(p, path))


def _known(program: str, path: str) -> bool:
    """A command on ``path``, or a bash builtin or keyword (``export``, ``until``)."""
    if shutil.which(program, path=path) is not None:
        return True
    kind = subprocess.run(
        ["bash", "-c", f"type -t {shlex.quote(program)}"],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    return kind.stdout.strip() in ("builtin", "keyword")


@pytest.mark.integration
# Each block of a file gets its own deadline (30 s unless timeout= says), and a stack starts.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("doc", [doc for doc in DOC_FILES if _runs(doc)])
def test_examples_hold(doc: str, docs_cache_dir: Path, tmp_path: Path) -> None:
    """Every run, console and serve example of the file, in order, against a real stack:
    each exits 0, prints what the doc shows, or serves what it says."""
    run = FileRun(lambda: start_stack(docs_cache_dir, tmp_path / "stack"), docs_cache_dir)
    failures: list[str] = []
    absent: list[str] = []
    try:
        for block in examples(doc):
            assert block.marker is not None, f"{block.where}: unmarked"
            if block.marker.kind == "check":
                continue
            if block.marker.kind in ("run", "serve") and (gone := _missing_programs(block)):
                absent.append(f"{block.where} needs {', '.join(gone)}")
                continue
            failures += [f"{block.where} ({block.marker.kind}): {p}" for p in run.run(block)]
    finally:
        failures += run.close()
    assert not failures, "\n\n".join(failures)
    if absent:
        missing("; ".join(absent))
