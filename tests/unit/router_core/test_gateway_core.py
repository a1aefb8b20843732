"""The worker gateway's decisions (router_core.worker_gateway.core), without sockets."""

from __future__ import annotations

import pytest

from router_core.worker_gateway import frames as verbs
from router_core.worker_gateway.core import (
    Count,
    Forget,
    ForwardUp,
    GatewayCore,
    Listen,
    Reply,
)
from router_core.worker_gateway.settings import requests_listen_for

PREFIX = "ipc:///run/sb/remote-"


def core(max_peers: int = 4, idle_s: float = 30.0) -> GatewayCore:
    return GatewayCore(PREFIX, max_peers=max_peers, idle_s=idle_s)


def hello(gateway: GatewayCore, worker: str, key: str = "host-a", now: float = 0.0) -> list:
    address = (PREFIX + worker).encode()
    return gateway.on_control(worker.encode(), key, [verbs.HELLO, address], now)


class TestHello:
    def test_info_names_the_prefix(self) -> None:
        """INFO is answered with the prefix, from any routing id."""
        assert core().on_control(b"\x00abc", "k", [verbs.INFO], 0.0) == [
            Reply(b"\x00abc", [verbs.PREFIX, PREFIX.encode()])
        ]

    def test_hello_listens_then_welcomes(self) -> None:
        """A first HELLO binds the return address before the WELCOME goes out."""
        assert hello(core(), "w-1") == [
            Listen("w-1", PREFIX + "w-1"),
            Reply(b"w-1", [verbs.WELCOME, (PREFIX + "w-1").encode()]),
            Count("remote_workers", "welcomed"),
        ]

    def test_hello_again_from_the_same_key_is_welcomed_without_a_second_listen(self) -> None:
        """A repeated HELLO (after WHO, say) is welcomed again; the address stays."""
        gateway = core()
        hello(gateway, "w-1")
        assert hello(gateway, "w-1", now=5.0) == [
            Reply(b"w-1", [verbs.WELCOME, (PREFIX + "w-1").encode()])
        ]

    @pytest.mark.parametrize(
        ("routing_id", "address", "reason"),
        [
            (b"\x00\x01", b"x", "bad_id"),
            (b"../etc", b"ipc:///run/sb/remote-../etc", "bad_id"),
            (b"w-1", b"ipc:///elsewhere/w-1", "bad_address"),
        ],
    )
    def test_bad_hellos_are_refused_and_counted(
        self, routing_id: bytes, address: bytes, reason: str
    ) -> None:
        """A routing id that is no worker id, or an address not under the prefix: refused."""
        assert core().on_control(routing_id, "k", [verbs.HELLO, address], 0.0) == [
            Reply(routing_id, [verbs.REFUSED, reason.encode()]),
            Count("refused", reason),
        ]

    def test_another_key_cannot_take_a_worker_id_in_use(self) -> None:
        """A HELLO or UP for a bound worker id from another key is refused (id_taken)."""
        gateway = core()
        hello(gateway, "w-1", key="host-a")
        refused = [Reply(b"w-1", [verbs.REFUSED, b"id_taken"]), Count("refused", "id_taken")]
        assert hello(gateway, "w-1", key="host-b") == refused
        assert gateway.on_control(b"w-1", "host-b", [verbs.UP, b"h"], 1.0) == refused

    def test_full_gateway_refuses(self) -> None:
        """Beyond max_peers a new worker is refused (full); known ones still are welcomed."""
        gateway = core(max_peers=1)
        hello(gateway, "w-1")
        assert hello(gateway, "w-2")[-1] == Count("refused", "full")
        assert hello(gateway, "w-1")[0] == Reply(b"w-1", [verbs.WELCOME, (PREFIX + "w-1").encode()])


class TestUp:
    def test_known_worker_is_forwarded(self) -> None:
        """UP from a welcomed worker forwards the frames after the verb."""
        gateway = core()
        hello(gateway, "w-1")
        assert gateway.on_control(b"w-1", "host-a", [verbs.UP, b"h", b"p"], 1.0) == [
            ForwardUp([b"h", b"p"])
        ]

    def test_unknown_worker_is_asked_who(self) -> None:
        """UP from a worker the gateway does not know (it restarted) gets WHO, not forwarded."""
        assert core().on_control(b"w-1", "host-a", [verbs.UP, b"h"], 0.0) == [
            Reply(b"w-1", [verbs.WHO]),
            Count("rejected", "gateway_unknown_peer"),
        ]

    def test_empty_up_and_unknown_verbs_are_rejected(self) -> None:
        """An UP with nothing after it, an unknown verb, a HELLO without address: counted."""
        gateway = core()
        hello(gateway, "w-1")
        assert gateway.on_control(b"w-1", "host-a", [verbs.UP], 0.0) == [
            Count("rejected", "gateway_empty")
        ]
        for message in ([b"NOPE"], [verbs.HELLO], [verbs.DOWN, b"x"], []):
            assert gateway.on_control(b"w-1", "host-a", message, 0.0) == [
                Count("rejected", "gateway_verb")
            ]


class TestIdle:
    def test_silent_workers_are_forgotten_and_active_ones_kept(self) -> None:
        """A worker silent for idle_s is forgotten; one that sent UP meanwhile stays."""
        gateway = core(idle_s=10.0)
        hello(gateway, "w-1", now=0.0)
        hello(gateway, "w-2", now=0.0)
        gateway.on_control(b"w-2", "host-a", [verbs.UP, b"h"], 8.0)
        assert gateway.on_tick(10.0) == [Forget("w-1"), Count("remote_workers", "forgotten")]
        assert list(gateway.peers) == ["w-2"]
        assert gateway.on_tick(17.0) == []

    def test_forgotten_worker_is_asked_who_and_can_come_back(self) -> None:
        """After being forgotten a worker gets WHO, then HELLO binds its address again."""
        gateway = core(idle_s=1.0)
        hello(gateway, "w-1")
        gateway.on_tick(2.0)
        assert gateway.on_control(b"w-1", "host-a", [verbs.UP, b"h"], 2.0)[0] == Reply(
            b"w-1", [verbs.WHO]
        )
        assert hello(gateway, "w-1", now=2.0)[0] == Listen("w-1", PREFIX + "w-1")


class TestRequestsEndpoint:
    def test_next_port(self) -> None:
        """The requests endpoint is the control endpoint's host and the next port."""
        assert requests_listen_for("tcp://169.254.0.1:7100") == "tcp://169.254.0.1:7101"
        assert requests_listen_for("tcp://[::1]:7100") == "tcp://[::1]:7101"

    @pytest.mark.parametrize("bad", ["ipc:///x", "tcp://host", "tcp://h:65535", "tcp://:1"])
    def test_bad_control_endpoint(self, bad: str) -> None:
        """Anything but tcp://HOST:PORT with room for the next port is refused."""
        with pytest.raises(ValueError, match=r"tcp://HOST:PORT|1\.\.65534"):
            requests_listen_for(bad)
