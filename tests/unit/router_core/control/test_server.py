"""Tests for ControlServer's dispatch, driven by raw DEALER and REQ sockets."""

from __future__ import annotations

import msgspec
import pytest
import zmq

from router_core.control import ControlRequest, ErrorCode
from router_core.control.protocol import decode_reply, encode, ok
from tests.unit.router_core.control.command_table import Clients, InlineServer, receive, request


class TestControlServer:
    """ControlServer driven by raw DEALER and REQ sockets."""

    def test_dealer_request_gets_reply(self, inline: InlineServer, clients: Clients) -> None:
        """A DEALER request is answered with the same id, and the command is counted."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send(request(7, "add", a=2, b=3))
        inline.pump()
        assert decode_reply(receive(sock)[-1]) == ok(7, 5)
        assert inline.counters.get("control_commands", "add") == 1

    def test_request_past_its_deadline_is_dropped(
        self, inline: InlineServer, clients: Clients
    ) -> None:
        """A request read after its deadline is not run nor answered, only counted."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        late = ControlRequest(id=3, command="add", args={"a": 1, "b": 1}, deadline_ns=1)
        sock.send(encode(late))
        sock.send(request(4, "add", a=2, b=2))
        inline.pump()
        assert decode_reply(receive(sock)[-1]) == ok(4, 4)
        assert inline.counters.get("rejected", "control_expired") == 1
        assert inline.counters.get("control_commands", "add") == 1

    def test_req_socket_with_empty_delimiter(self, inline: InlineServer, clients: Clients) -> None:
        """A REQ client (identity, empty delimiter, request) gets its reply."""
        sock = clients.connect(zmq.REQ, inline.endpoint)
        sock.send(request(1, "add", a=40, b=2))
        inline.pump()
        frames = receive(sock)
        assert len(frames) == 1
        assert decode_reply(frames[0]) == ok(1, 42)

    @pytest.mark.parametrize(
        "frame", [b"\xc1garbage", msgspec.msgpack.encode({"not": "a request"}), b""]
    )
    def test_garbage_frame_gets_bad_request(
        self, inline: InlineServer, clients: Clients, frame: bytes
    ) -> None:
        """A frame that is not a ControlRequest gets BAD_REQUEST with id 0, and is counted."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send(frame)
        inline.pump()
        reply = decode_reply(receive(sock)[-1])
        assert (reply.id, reply.ok) == (0, False)
        assert reply.error is not None and reply.error.code == ErrorCode.BAD_REQUEST
        assert inline.counters.get("rejected", "control_request") == 1

    @pytest.mark.parametrize("extra", [[b"not-empty"], [b"", b"x"]])
    def test_bad_envelope_gets_bad_request(
        self,
        inline: InlineServer,
        clients: Clients,
        extra: list[bytes],
    ) -> None:
        """Extra frames that are not a REQ delimiter are refused with BAD_REQUEST."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send_multipart([*extra, request(1, "add", a=1, b=1)])
        inline.pump()
        frames = receive(sock)
        assert frames[:-1] == extra
        reply = decode_reply(frames[-1])
        assert reply.error is not None and reply.error.code == ErrorCode.BAD_REQUEST
        assert inline.counters.get("rejected", "control_envelope") == 1
        assert inline.counters.total("control_commands") == 0

    def test_deferred_then_answer(self, inline: InlineServer, clients: Clients) -> None:
        """A DEFERRED handler sends nothing; answer() later replies to the right request id."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send(request(1, "hold", value=11))
        inline.pump()
        assert len(inline.state.held) == 1
        assert not sock.poll(0, zmq.POLLIN)
        sock.send(request(2, "release", value=22))
        inline.pump()
        replies = [decode_reply(receive(sock)[-1]) for _ in range(2)]
        assert replies == [ok(1, 11), ok(2, 22)]

    def test_unencodable_result_is_internal(self, inline: InlineServer, clients: Clients) -> None:
        """A handler result that cannot be encoded is answered INTERNAL; serving goes on."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        sock.send(request(1, "opaque"))
        inline.pump()
        reply = decode_reply(receive(sock)[-1])
        assert reply.error is not None and reply.error.code == ErrorCode.INTERNAL
        sock.send(request(2, "add", a=1, b=1))
        inline.pump()
        assert decode_reply(receive(sock)[-1]) == ok(2, 2)

    def test_serves_a_bounded_budget_per_call(self, inline: InlineServer, clients: Clients) -> None:
        """One handle_ready() serves at most its budget; the rest wait for the next call."""
        sock = clients.connect(zmq.DEALER, inline.endpoint)
        for request_id in range(1, 71):
            sock.send(request(request_id, "nothing"))
        inline.pump()
        assert inline.counters.get("control_commands", "nothing") == 64
        inline.pump()
        assert inline.counters.get("control_commands", "nothing") == 70
        ids = [decode_reply(receive(sock)[-1]).id for _ in range(70)]
        assert ids == list(range(1, 71))
