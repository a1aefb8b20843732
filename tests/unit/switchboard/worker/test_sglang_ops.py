"""The pure parts of SGLang's operator endpoints: the barrier's wait, the load's shape."""

from __future__ import annotations

import pytest

from router_core.wire.control import LoadSnapshot
from switchboard.worker.sglang_ops import barrier_wait_s, load_entry


class TestBarrierWait:
    """How long the worker waits for a forwarded barrier."""

    @pytest.mark.parametrize(
        ("body", "wait"),
        [
            (b"", 5.0),
            (b'{"timeout_s": 30}', 30.0),
            (b'{"timeout_s": 0.5, "mode": "abort"}', 0.5),
            (b'{"timeout_s": true}', 5.0),
            (b'{"timeout_s": 9999}', 5.0),
            (b"[1]", 5.0),
            (b"not json", 5.0),
        ],
    )
    def test_its_timeout_or_the_default(self, body: bytes, wait: float) -> None:
        """A timeout_s the admin app takes, else its default (bad bodies fail at once)."""
        assert barrier_wait_s(body) == wait


class TestLoadEntry:
    """/get_load's entry, SGLang's GetLoadReqOutput, from the engine's snapshot."""

    def test_before_the_first_snapshot(self) -> None:
        """Zeros, and no snapshot of ours."""
        assert load_entry(None, 0) == {
            "dp_rank": 0,
            "num_reqs": 0,
            "num_waiting_reqs": 0,
            "num_tokens": 0,
            "switchboard": None,
        }

    def test_a_snapshot(self) -> None:
        """num_reqs counts running and waiting, num_tokens the KV cells in use; ours has
        the snapshot's age."""
        load = LoadSnapshot(
            running=3, waiting=2, max_running=8, kv_cells_used=640, kv_cells_total=4096,
            taken_ns=1_000_000_000,
        )  # fmt: skip
        entry = load_entry(load, 3_500_000_000)
        assert (entry["num_reqs"], entry["num_waiting_reqs"], entry["num_tokens"]) == (5, 2, 640)
        ours = entry["switchboard"]
        assert (ours["running"], ours["kv_cells_total"], ours["age_s"]) == (3, 4096, 2.5)

    def test_every_field_but_the_stack_key(self) -> None:
        """The whole snapshot shows (a field added to LoadSnapshot shows too), except its
        secret, which an HTTP answer must never carry."""
        load = LoadSnapshot(running=1, features=["logprobs"], engine_started_ns=7, secret="s3")
        ours = load_entry(load, 0)["switchboard"]
        expected = {field for field in LoadSnapshot.__struct_fields__ if field != "secret"}
        assert set(ours) == expected | {"age_s"}
        assert ours["features"] == ["logprobs"] and ours["engine_started_ns"] == 7
        assert "s3" not in str(ours) and ours["age_s"] is None
