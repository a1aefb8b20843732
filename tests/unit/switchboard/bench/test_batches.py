"""Tests for the batches the split measurement sends (switchboard.bench.batches): rows
spread evenly over the workers, each naming its owner."""

from __future__ import annotations

from switchboard.bench.batches import SplitPlan

WORKERS = tuple(f"ipc:///tmp/sb-test/worker-{i}" for i in range(4))


class TestPlan:
    def test_rows_spread_evenly_over_workers(self) -> None:
        """Round-robin ownership gives every worker the same share, even for B=1."""
        for batch_size in (1, 8, 64):
            plan = SplitPlan(batch_size, 16, WORKERS)
            counts = plan.expected_rows()
            assert sum(counts.values()) == plan.requests
            assert len(set(counts.values())) == 1

    def test_batches_name_their_owners(self) -> None:
        """Every row's http_worker_ipcs entry is the owner the plan assigns."""
        plan = SplitPlan(8, 3, WORKERS, logprobs=True)
        for distinct, batch in enumerate(plan.build()):
            assert batch.http_worker_ipcs == [plan.owner(distinct, row) for row in range(8)]
            assert batch.output_top_logprobs_val is not None
