"""switchboard bench engine --quick end to end: both real stacks (switchboard up with the
llama.cpp engine, and llama-cpp-python's own server) on the tiny generated model, the
JSON and the PNG written, every level measured without errors, nothing left running."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.integration.harness.polling import REPO_ROOT
from tests.integration.harness.supervisor import stack_env
from tests.support.llama_models import tiny_model

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_quick_run_writes_every_figure(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed")
    tiny_model()  # the llama extra is there (a failure under CI=true otherwise)
    out = tmp_path / "engine.json"
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "bench", "engine", "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=stack_env(tmp_path / "cache"),
        timeout=200,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    results = json.loads(out.read_text(encoding="utf-8"))
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
    figures = results["figures"]
    keys = ["llama_vs_server_c1", "llama_vs_server_c8", "llama_vs_server_c32"]
    assert all(figures[key] > 0 for key in [*keys, "ttft_p99_vs_server_c32"]), figures
    for stack in ("switchboard", "server"):
        for concurrency, level in results["levels"][stack].items():
            assert level["errors"] == 0, (stack, concurrency, result.stderr)
            # max_tokens 16; a prompt may meet its end-of-text token sooner
            assert level["output_tokens"] >= level["requests"] * 8, (stack, level)
            assert level["ttft_p50_s"] > 0 and level["cpu_s_per_request"] > 0
    # Greedy on one model: most prompts come back with the same text from both.
    same = results["prompts_same_text"]
    assert same["of"] > 0 and same["same"] >= same["of"] // 2, same
    assert "| 32 | Switchboard |" in result.stdout
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not left, f"left running: {left}"
