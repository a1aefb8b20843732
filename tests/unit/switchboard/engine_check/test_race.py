"""engine-check's rule for a request that finished before its command could arrive."""

from __future__ import annotations

from switchboard.engine_check.rows import RequestRun
from switchboard.engine_check.verdicts import RACE_S, ended_before

SENT_NS = 1_000_000_000_000


def finished(kind: str, sent_ns: int) -> RequestRun:
    """A run finished with ``kind`` in a message the engine framed at ``sent_ns``."""
    return RequestRun("a", finish={"type": kind}, finish_sent_ns=sent_ns)


class TestFinishedFirst:
    """ended_before: what tells nothing about how a command was applied."""

    def test_ended_alone_before_the_command_could_arrive(self) -> None:
        """A length finish framed before the command (or within RACE_S) tells nothing."""
        assert ended_before(finished("length", SENT_NS - 1), SENT_NS)
        soon = SENT_NS + int(RACE_S * 1e9) - 1
        assert ended_before(finished("length", soon), SENT_NS)

    def test_later_or_aborted_counts(self) -> None:
        """A finish framed well after, an abort, or an unstamped message is judged."""
        late = SENT_NS + int(RACE_S * 1e9) + 1
        assert not ended_before(finished("length", late), SENT_NS)
        assert not ended_before(finished("abort", SENT_NS - 1), SENT_NS)
        assert not ended_before(finished("length", 0), SENT_NS)
        assert not ended_before(RequestRun("a"), SENT_NS)
