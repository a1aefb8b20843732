"""The ZAP handler: who may complete a CURVE handshake with a process's sockets.

libzmq asks a ZAP handler (RFC 27, bound at :data:`ZAP_ENDPOINT` in the socket's own
context) about every connection to a ``CURVE_SERVER`` socket. Without a handler, libzmq
lets *any* key in, so a process binds its handler before it binds a CURVE socket
(:func:`curve_server` refuses otherwise) and answers each request with
:func:`zap_reply`: 200 for a key in the authorised-keys file, 400 for everything else.

A ZAP request, after the ROUTER's routing id and the empty delimiter, is the frames
``version ("1.0"), request id, domain, address, routing id, mechanism, credentials…``;
the reply is ``version, request id, status code, status text, user id, metadata``. The
user id of an accepted connection is the key's name, which ZeroMQ attaches to every
message that connection delivers (the ``User-Id`` frame property).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Final

import zmq

from router_core.counters import Counters
from router_core.curve import AuthorisedKeys, ClientKeys, KeyPair

__all__ = ["ZAP_ENDPOINT", "ZapHandler", "curve_client", "curve_server", "zap_reply"]

logger = logging.getLogger(__name__)

ZAP_ENDPOINT: Final = "inproc://zeromq.zap.01"
_VERSION: Final = b"1.0"
#: Requests answered per call of :meth:`ZapHandler.handle_ready`, so a flood of
#: handshakes cannot hold a loop.
_BUDGET: Final = 64
#: A refusal is logged once per peer address and reason this often.
LOG_EVERY_S: Final = 10.0
_MAX_LOGGED: Final = 1024


def zap_reply(request: Sequence[bytes], keys: AuthorisedKeys) -> tuple[list[bytes], str]:
    """The reply frames to one ZAP request (without routing id and delimiter), and the
    verdict: ``accepted`` or the reason it was refused (a counter label)."""
    if len(request) < 6 or request[0] != _VERSION:
        # Not answerable: libzmq never sends this; answer 500 so nothing hangs on it.
        request_id = request[1] if len(request) > 1 else b""
        return _reply(request_id, b"500", b"malformed ZAP request"), "malformed"
    request_id, mechanism, credentials = request[1], request[5], request[6:]
    if mechanism != b"CURVE" or len(credentials) != 1 or len(credentials[0]) != 32:
        return _reply(request_id, b"400", b"CURVE required"), "not_curve"
    name = keys.name_of(credentials[0])
    if name is None:
        return _reply(request_id, b"400", b"key not authorised"), "unknown_key"
    return _reply(request_id, b"200", b"OK", name.encode()), "accepted"


def _reply(request_id: bytes, status: bytes, text: bytes, user_id: bytes = b"") -> list[bytes]:
    return [_VERSION, request_id, status, text, user_id, b""]


class ZapHandler:
    """Answers ZAP requests in ``context`` from ``keys``, counting each verdict in
    ``counters`` (``curve{accepted}``, ``refused{unknown_key}``, ``refused{not_curve}``).

    :meth:`open` binds the handler socket (``zmq.ZMQError`` if the context has one
    already); the owner polls :attr:`socket` and calls :meth:`handle_ready` when it is
    readable; :meth:`close` closes it. A refusal is logged with the peer's address (once
    per address and reason every 10 s), never with its key material.
    """

    def __init__(
        self, context: zmq.Context[zmq.Socket[bytes]], keys: AuthorisedKeys, counters: Counters
    ) -> None:
        self._context = context
        self._keys = keys
        self._counters = counters
        self._socket: zmq.Socket[bytes] | None = None
        self._logged: dict[tuple[str, str], float] = {}

    @property
    def socket(self) -> zmq.Socket[bytes]:
        """The bound handler socket (after :meth:`open`)."""
        if self._socket is None:
            raise RuntimeError("the ZAP handler is not open")
        return self._socket

    def open(self) -> None:
        """Bind the handler in the context."""
        sock = self._context.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.bind(ZAP_ENDPOINT)
        except zmq.ZMQError:
            sock.close()
            raise
        self._socket = sock

    def handle_ready(self) -> None:
        """Answer the requests waiting, up to a budget."""
        sock = self.socket
        for _ in range(_BUDGET):
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) < 2 or frames[1] != b"":
                self._counters.add("refused", "malformed_zap")
                continue
            reply, verdict = zap_reply(frames[2:], self._keys)
            if verdict == "accepted":
                self._counters.add("curve", "accepted")
            else:
                self._counters.add("refused", verdict)
                address = frames[5].decode("ascii", "replace") if len(frames) > 5 else "?"
                self._log_refusal(address, verdict)
            try:
                sock.send_multipart([frames[0], b"", *reply], zmq.NOBLOCK)
            except zmq.Again:
                self._counters.add("dropped", "zap_reply")

    def _log_refusal(self, address: str, verdict: str) -> None:
        """Log a refusal, at most once per address and reason every :data:`LOG_EVERY_S`
        (a peer retrying its handshake must not flood the log; the counter counts all)."""
        now = time.monotonic()
        key = (address, verdict)
        if now - self._logged.get(key, -LOG_EVERY_S) < LOG_EVERY_S:
            return
        if len(self._logged) >= _MAX_LOGGED:
            self._logged.clear()
        self._logged[key] = now
        logger.warning("CURVE handshake from %s refused: %s", address, verdict)

    def close(self) -> None:
        """Close the handler socket; safe to call twice."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _has_zap_handler(context: zmq.Context[zmq.Socket[bytes]]) -> bool:
    """Whether a handler is bound in ``context``: binding its name again must fail."""
    probe = context.socket(zmq.ROUTER)
    probe.setsockopt(zmq.LINGER, 0)
    try:
        probe.bind(ZAP_ENDPOINT)
    except zmq.ZMQError as exc:
        return exc.errno == zmq.EADDRINUSE
    finally:
        probe.close()
    return False


def curve_server(sock: zmq.Socket[bytes], keys: KeyPair) -> None:
    """Make ``sock`` (not yet bound) a CURVE server with ``keys``; refuses
    (``RuntimeError``) when its context has no ZAP handler, which would let any key in."""
    if not _has_zap_handler(sock.context):
        raise RuntimeError("a CURVE server socket needs the ZAP handler bound first")
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.CURVE_SECRETKEY, keys.secret.encode("ascii"))
    # Enforce ZAP even for a domain the handler never heard of (libzmq's default is lax).
    sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
    sock.setsockopt_string(zmq.ZAP_DOMAIN, "switchboard")


def curve_client(sock: zmq.Socket[bytes], keys: ClientKeys) -> None:
    """Make ``sock`` (not yet connected) a CURVE client with ``keys``."""
    sock.setsockopt(zmq.CURVE_SERVERKEY, keys.server_public.encode("ascii"))
    sock.setsockopt(zmq.CURVE_PUBLICKEY, keys.pair.public.encode("ascii"))
    sock.setsockopt(zmq.CURVE_SECRETKEY, keys.pair.secret.encode("ascii"))
