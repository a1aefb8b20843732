"""Smoke tests of the split measurement of ``switchboard bench router``
(switchboard.bench.backward), at a tiny size.

No timing is asserted (these machines are noisy): each measurement delivers every message
it sends and leaves no child process and no temporary directory behind (the ``clean_root``
fixture of the bench conftest).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from switchboard.bench.backward import IMPLS, SplitRun, measure_split


class TestSplit:
    @pytest.mark.parametrize("logprobs", [False, True])
    @pytest.mark.parametrize("impl", IMPLS)
    def test_delivers_every_request_to_its_owner(
        self, impl: str, logprobs: bool, clean_root: Path
    ) -> None:
        """Both designs deliver every request of every batch to its owning worker."""
        run = measure_split(impl, 8, 200, logprobs=logprobs, root=clean_root)  # type: ignore[arg-type]
        assert isinstance(run, SplitRun)
        assert (run.impl, run.batch_size, run.logprobs, run.sent) == (impl, 8, logprobs, 200)
        assert run.delivered == run.sent
        assert run.misrouted == 0
        assert run.complete
        assert 0 < run.counted < run.delivered
        assert run.rate > 0
        assert run.router_losses == {}

    def test_rounds_requests_up_to_whole_batches(self, clean_root: Path) -> None:
        """A request count that is not a multiple of the batch size sends whole batches."""
        run = measure_split("switchboard", 64, 100, root=clean_root)
        assert run.sent == 128
        assert run.delivered == 128
