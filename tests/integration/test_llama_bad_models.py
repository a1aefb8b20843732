"""A model file llama.cpp cannot serve is one line at start, naming the file, exit 2.

Four kinds of bad file, each given to the engine itself (``switchboard engine --backend
llama-cpp``) and to ``switchboard up --engine llama-cpp``: a path that does not exist, a
file that is not GGUF, a GGUF file cut short, and a well-formed GGUF file of an
architecture llama.cpp does not know. No traceback, nothing on stdout, nothing left in
the run directory but the stack key.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness.polling import REPO_ROOT
from tests.integration.harness.supervisor import refuse, stack_env
from tests.support.llama_models import tiny_model

pytestmark = pytest.mark.integration


def _unknown_architecture(path: Path) -> Path:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "nosucharch")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def bad_models(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Each bad model by kind: its path and what the refusal must say."""
    text = tmp_path / "notes.gguf"
    text.write_text("not a model\n")
    cut = tmp_path / "cut.gguf"
    whole = tiny_model().read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])
    return {
        "missing": (tmp_path / "absent.gguf", "no such file"),
        "not GGUF": (text, "not a GGUF file"),
        "cut short": (cut, "corrupted or incomplete"),
        "unknown architecture": (
            _unknown_architecture(tmp_path / "arch.gguf"),
            "unknown model architecture: 'nosucharch'",
        ),
    }


KINDS = ["missing", "not GGUF", "cut short", "unknown architecture"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_engine_refuses_it_in_one_line(tmp_path: Path, kind: str) -> None:
    path, says = bad_models(tmp_path)[kind]
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "switchboard.cli", "engine", "--run-dir", str(run_dir)),
            *("--backend", "llama-cpp", "--model", str(path)),
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=stack_env(tmp_path / "cache"),
        timeout=60,
        check=False,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert lines == [f"switchboard engine: model {path}: {lines[0].split(': ', 2)[2]}"]
    assert says in lines[0] and "Traceback" not in result.stderr
    assert result.stdout == ""
    assert sorted(p.name for p in run_dir.iterdir()) == ["stack.key"]


@pytest.mark.parametrize("kind", KINDS)
def test_up_refuses_it_in_one_line(tmp_path: Path, kind: str) -> None:
    path, says = bad_models(tmp_path)[kind]
    line = refuse(tmp_path / "cache", "--engine", "llama-cpp", "--model", str(path))
    assert line.startswith(f"switchboard up: --model {path}: ")
    assert (says if kind != "missing" else "not found (expected a GGUF model file)") in line
