"""Smoke tests of the forward-hop measurement of ``switchboard bench router``
(switchboard.bench.forward), at a tiny size.

No timing is asserted (these machines are noisy): each measurement delivers every message
it sends and leaves no child process and no temporary directory behind (the ``clean_root``
fixture of the bench conftest).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from router_core.wire import Kind, decode_payload
from router_core.wire.requests import GenerateRequest
from switchboard.bench.forward import PATHS, HopRun, generate_payload, measure_forward


class TestForward:
    @pytest.mark.parametrize("path", PATHS)
    def test_delivers_every_message(self, path: str, clean_root: Path) -> None:
        """Each path delivers all timed messages intact and reports a positive rate."""
        run = measure_forward(path, 1024, 300, root=clean_root)  # type: ignore[arg-type]
        assert isinstance(run, HopRun)
        assert (run.path, run.size, run.sent) == (path, 1024, 300)
        assert run.delivered == run.sent
        assert run.malformed == 0
        assert run.complete
        assert run.seconds > 0
        assert run.rate > 0
        assert run.router_losses == {}

    @pytest.mark.parametrize("size", [64, 1024, 16384])
    def test_payload_is_a_generate_request_of_exact_size(self, size: int) -> None:
        """The forward payload is a real GenerateRequest of exactly the nominal size."""
        payload = generate_payload(size)
        assert len(payload) == size
        assert isinstance(decode_payload(Kind.GENERATE, payload), GenerateRequest)
