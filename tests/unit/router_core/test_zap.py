"""The ZAP handler and CURVE sockets (router_core.zap), over real loopback tcp."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from router_core.counters import Counters
from router_core.curve import AuthorisedKeys, ClientKeys, KeyPair, decode_key
from router_core.curve_files import read_key_pair, write_key_pair
from router_core.zap import ZapHandler, curve_client, curve_server, zap_reply


def pair(directory: Path, name: str) -> KeyPair:
    return read_key_pair(write_key_pair(directory, name)[0])


class TestZapReply:
    def _keys(self, tmp_path: Path, *publics: str) -> AuthorisedKeys:
        path = tmp_path / "authorised"
        path.write_text("".join(f"{public} host\n" for public in publics))
        keys = AuthorisedKeys(path)
        keys.load()
        return keys

    def test_authorised_key_gets_200_and_its_name(self, tmp_path: Path) -> None:
        """An authorised key is answered 200 with the key's name as user id."""
        public, _ = zmq.curve_keypair()
        keys = self._keys(tmp_path, public.decode())
        request = [
            b"1.0",
            b"7",
            b"switchboard",
            b"127.0.0.1",
            b"",
            b"CURVE",
            decode_key(public.decode()),
        ]
        assert zap_reply(request, keys) == ([b"1.0", b"7", b"200", b"OK", b"host", b""], "accepted")

    def test_other_keys_and_mechanisms_get_400(self, tmp_path: Path) -> None:
        """An unknown key, a NULL or PLAIN mechanism, a short key: 400 with a reason."""
        keys = self._keys(tmp_path, zmq.curve_keypair()[0].decode())
        base = [b"1.0", b"1", b"d", b"addr", b""]
        assert zap_reply([*base, b"CURVE", b"x" * 32], keys)[1] == "unknown_key"
        assert zap_reply([*base, b"NULL"], keys)[1] == "not_curve"
        assert zap_reply([*base, b"PLAIN", b"u", b"p"], keys)[1] == "not_curve"
        assert zap_reply([*base, b"CURVE", b"short"], keys)[1] == "not_curve"
        assert zap_reply([b"2.0", b"1"], keys) == (
            [b"1.0", b"1", b"500", b"malformed ZAP request", b"", b""],
            "malformed",
        )


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


class TestCurveHandshake:
    def test_server_refuses_to_start_without_a_handler(
        self, tmp_path: Path, context: zmq.Context[zmq.Socket[bytes]]
    ) -> None:
        """Without a ZAP handler libzmq would let any key in, so curve_server refuses."""
        sock = context.socket(zmq.ROUTER)
        with pytest.raises(RuntimeError, match="ZAP handler"):
            curve_server(sock, pair(tmp_path, "server"))
        sock.close()

    def test_only_authorised_clients_are_heard(
        self, tmp_path: Path, context: zmq.Context[zmq.Socket[bytes]]
    ) -> None:
        """An authorised client's message arrives with its name; an unknown key's never does."""
        server, good, bad = (pair(tmp_path, name) for name in ("server", "good", "bad"))
        (tmp_path / "authorised").write_text((tmp_path / "good.public").read_text())
        keys = AuthorisedKeys(tmp_path / "authorised")
        keys.load()
        counters = Counters()
        handler = ZapHandler(context, keys, counters)
        handler.open()
        router = context.socket(zmq.ROUTER)
        curve_server(router, server)
        port = router.bind_to_random_port("tcp://127.0.0.1")
        clients = []
        for name, keypair in ((b"good", good), (b"bad", bad)):
            client = context.socket(zmq.DEALER)
            client.setsockopt(zmq.LINGER, 0)
            client.setsockopt(zmq.ROUTING_ID, name)
            curve_client(client, ClientKeys(keypair, server.public))
            client.connect(f"tcp://127.0.0.1:{port}")
            client.send(b"hello from " + name)
            clients.append(client)
        poller = zmq.Poller()
        poller.register(handler.socket, zmq.POLLIN)
        poller.register(router, zmq.POLLIN)
        heard: list[tuple[bytes, str]] = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and counters.total("refused") + len(heard) < 2:
            for sock, _ in poller.poll(50):
                if sock is handler.socket:
                    handler.handle_ready()
                else:
                    frames = router.recv_multipart(copy=False)
                    heard.append((frames[1].bytes, frames[1].get("User-Id")))
        assert heard == [(b"hello from good", "good")]
        assert counters.snapshot() == {"curve": {"accepted": 1}, "refused": {"unknown_key": 1}}
        for client in clients:
            client.close()
        router.close()
        handler.close()
