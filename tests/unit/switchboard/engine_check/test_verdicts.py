"""engine-check's pure judgements (verdicts.py): loads, acks, op ids, stop choices."""

from __future__ import annotations

from router_core.wire.control import Acknowledgement, LoadSnapshot, op_order
from switchboard.engine_check.verdicts import (
    ack_problems,
    echoes_prompt,
    interval_problems,
    load_problems,
    op_id,
    pick_stop_id,
    pick_stop_string,
)

KEY = "k" * 64


class TestLoad:
    """load_problems and interval_problems."""

    def test_conforming_snapshot(self) -> None:
        """The key, a start time and a sane limit: no problem."""
        snapshot = LoadSnapshot(max_running=8, engine_started_ns=1, secret=KEY)
        assert load_problems(snapshot, KEY) == []

    def test_each_field_named(self) -> None:
        """No key, engine_started_ns 0 and max_running 0 are three problems, each with a fix."""
        problems = load_problems(LoadSnapshot(), KEY)
        assert [seen for seen, _ in problems] == [
            "LOAD carries no secret",
            "engine_started_ns is 0",
            "max_running is 0",
        ]
        assert all("protocol.md" in fix for _, fix in problems)

    def test_wrong_key(self) -> None:
        """A secret that is not the key is named as such."""
        snapshot = LoadSnapshot(max_running=8, engine_started_ns=1, secret="x" * 64)
        assert (
            load_problems(snapshot, KEY)[0][0] == "LOAD carries a secret that is not the stack key"
        )

    def test_interval(self) -> None:
        """step or taken_ns going back, or a new engine_started_ns, are problems."""
        first = LoadSnapshot(step=5, taken_ns=10, engine_started_ns=1)
        assert (
            interval_problems(first, LoadSnapshot(step=5, taken_ns=11, engine_started_ns=1)) == []
        )
        went_back = interval_problems(first, LoadSnapshot(step=4, taken_ns=9, engine_started_ns=2))
        assert len(went_back) == 3


class TestAcks:
    """ack_problems and op_id."""

    def test_ack(self) -> None:
        """An engine ACK with the key conforms; another participant or no key does not."""
        assert (
            ack_problems(Acknowledgement(op_id="1-1", participant="engine", secret=KEY), KEY) == []
        )
        problems = ack_problems(Acknowledgement(op_id="1-1", participant="w0"), KEY)
        assert [seen for seen, _ in problems] == [
            "ACK names participant 'w0'",
            "ACK carries no secret",
        ]

    def test_op_id_orders(self) -> None:
        """op_id makes ids the protocol orders by (incarnation, seq)."""
        assert op_order(op_id(17, 3)) == (17, 3)


class TestStops:
    """The stop conditions derived from the first run's output."""

    def test_echo(self) -> None:
        """Output that repeats the prompt (cycled) is an echo; anything else is not."""
        assert echoes_prompt([1, 2, 3], [1, 2, 3, 1])
        assert not echoes_prompt([1, 2, 3], [1, 3])
        assert not echoes_prompt([], [1])

    def test_stop_id_is_first_unique_from_the_third(self) -> None:
        """The first id from index 2 that did not come before, and not the last id."""
        assert pick_stop_id([4, 5, 6, 7]) == (2, 6)
        assert pick_stop_id([4, 5, 4, 7, 8]) == (3, 7)
        assert pick_stop_id([4, 5, 6]) is None

    def test_stop_string_is_a_new_piece(self) -> None:
        """The stripped text an id adds, new to the text before it."""
        pieces = {1: "The", 2: " quick", 3: " quick", 4: " fox", 5: "!"}

        def decode(ids: object) -> str:
            return "".join(pieces[token] for token in ids)  # type: ignore[attr-defined]

        assert pick_stop_string([1, 2, 3, 4, 5], decode) == (3, "fox")
        assert pick_stop_string([1, 2, 3], decode) is None
