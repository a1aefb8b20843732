"""Fixtures shared by the admin app's tests: the two routers' control sockets, each answering
a canned ``metrics`` snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.app.metrics.snapshot_server import SnapshotServer
from tests.unit.app.metrics.snapshots import detokenizer_snapshot, tokenizer_snapshot


@pytest.fixture
def routers(run_dir: Path) -> Iterator[tuple[str, str]]:
    """The two routers' control endpoints, each answering a canned snapshot."""
    tokenizer = f"ipc://{run_dir}/router-control"
    detokenizer = f"ipc://{run_dir}/detok-router-control"
    with (
        SnapshotServer(tokenizer, tokenizer_snapshot()),
        SnapshotServer(detokenizer, detokenizer_snapshot()),
    ):
        yield tokenizer, detokenizer
