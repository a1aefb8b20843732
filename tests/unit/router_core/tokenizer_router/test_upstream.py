"""The router passes the output path's incarnations on: a new or grown one to every
worker, all of them to a worker that registers, repeats and junk to nobody."""

from __future__ import annotations

from router_core.wire import Kind, decode_header
from router_core.wire.control import UpstreamIncarnation
from tests.unit.router_core.tokenizer_router.shell import (
    CoreShell,
    address_of,
    payload_of,
    sends,
)


def beacon(shell: CoreShell, process: str, incarnation: int) -> list[object]:
    news = UpstreamIncarnation(process, incarnation)
    return shell.deliver(shell.core.worker_messages, Kind.UPSTREAM, news)  # type: ignore[return-value]


class TestUpstream:
    def test_a_first_sighting_and_a_restart_reach_every_worker(self) -> None:
        shell = CoreShell()
        shell.register("w1")
        shell.register("w2")
        first = sends(beacon(shell, "detokenizer-0", 100))
        assert [send.to for send in first] == [address_of("w1"), address_of("w2")]
        assert payload_of(first[0], UpstreamIncarnation) == UpstreamIncarnation(
            "detokenizer-0", 100
        )
        assert sends(beacon(shell, "detokenizer-0", 100)) == []  # the once-a-second repeat
        assert sends(beacon(shell, "detokenizer-0", 99)) == []  # an older one, late
        restarted = sends(beacon(shell, "detokenizer-0", 200))
        assert len(restarted) == 2
        assert shell.core.counters.snapshot()["upstream_incarnations"] == {
            "first": 1,
            "restarted": 1,
        }

    def test_a_registering_worker_is_told_every_incarnation_after_its_reply(self) -> None:
        shell = CoreShell()
        beacon(shell, "detokenizer-router", 5)
        beacon(shell, "detokenizer-1", 7)
        out = sends(shell.register("w1"))
        kinds = [decode_header(send.frames[0]).kind for send in out]
        assert kinds == [Kind.REGISTER_REPLY, Kind.UPSTREAM, Kind.UPSTREAM]
        told = [payload_of(send, UpstreamIncarnation) for send in out[1:]]
        assert told == [
            UpstreamIncarnation("detokenizer-1", 7),
            UpstreamIncarnation("detokenizer-router", 5),
        ]

    def test_junk_is_counted_and_not_passed_on(self) -> None:
        shell = CoreShell()
        shell.register("w1")
        for process, incarnation in (("", 5), ("x" * 65, 5), ("detokenizer-0", 0)):
            assert sends(beacon(shell, process, incarnation)) == []
        assert shell.core.counters.snapshot()["rejected"]["bad_upstream"] == 3
        assert shell.core.upstream.latest() == {}
