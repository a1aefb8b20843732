"""Tests for the seed-style baseline the split is measured against (switchboard.bench.naive):
its per-request objects carry what the generic split's rows carry."""

from __future__ import annotations

from router_core.wire import split_rows
from router_core.wire.outputs import BatchStrOutput
from switchboard.bench import naive
from switchboard.bench.batches import SplitPlan

WORKERS = tuple(f"ipc:///tmp/sb-test/worker-{i}" for i in range(4))


class TestNaiveModel:
    def test_field_copy_carries_the_same_content_as_the_generic_split(self) -> None:
        """The baseline's per-request objects hold what Switchboard's rows hold."""
        batch = SplitPlan(8, 1, WORKERS, logprobs=True).build()[0]
        column = naive.to_naive(batch)
        for index, row in enumerate(split_rows(batch)):
            one = naive.handle_output_by_index(column, index)
            for name, value in row.items():
                assert getattr(one, name) == value, name

    def test_per_request_object_survives_pickle(self) -> None:
        """A per-request object pickles and unpickles to an equal object."""
        batch = SplitPlan(4, 1, WORKERS).build()[0]
        one = naive.handle_output_by_index(naive.to_naive(batch), 2)
        assert naive.loads(naive.dumps(one)) == one

    def test_dataclass_has_every_output_field(self) -> None:
        """The baseline's dataclass has exactly BatchStrOutput's fields."""
        fields = set(naive.NaiveBatchStrOutput.__dataclass_fields__)
        assert fields == set(BatchStrOutput.__struct_fields__)
