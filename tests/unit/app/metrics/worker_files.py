"""A worker's multiprocess metric files, written by a real worker recorder in a child process
(as under ``switchboard up``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.integration.harness.polling import REPO_ROOT

__all__ = ["write_worker_metrics"]

_WORKER_SCRIPT = textwrap.dedent(
    """
    from switchboard.worker.metrics import worker_metrics
    metrics = worker_metrics("w0")
    assert metrics.enabled
    finished = metrics.http_started()
    metrics.http_finished(finished, "/generate", 200)
    metrics.http_started()  # still in flight when the process exits
    metrics.bad_request("invalid_prompt")
    metrics.http_refused("header_too_large")
    timer = metrics.generation(4)
    timer.chunk(1, finished=False)
    timer.chunk(3, finished=True)
    metrics.backward_output(0.0002, 3, 500)
    metrics.backward_output(None, 1, 100)
    metrics.flush()
    """
)


def write_worker_metrics(directory: Path) -> int:
    """Run a worker's recorder in a child process writing into ``directory``; its pid."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    done = subprocess.run(
        [sys.executable, "-c", _WORKER_SCRIPT],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    pid_files = [path.stem.rpartition("_")[2] for path in directory.glob("counter_*.db")]
    assert len(pid_files) == 1, pid_files
    return int(pid_files[0])
