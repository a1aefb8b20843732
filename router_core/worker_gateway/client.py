"""What a worker host asks the gateway before its workers start: the return-address prefix.

A remote worker's return address is the gateway's prefix and the worker id (:mod:`.frames`).
:func:`ask_prefix` sends ``INFO`` over a CURVE connection and waits, with a deadline, for
``PREFIX``; the same exchange proves the control host is reachable and lets this host's
key in, so a worker host fails at start with a clear message rather than serving nothing.
"""

from __future__ import annotations

import time

import zmq

from router_core.curve import ClientKeys
from router_core.worker_gateway import frames as verbs
from router_core.zap import curve_client

__all__ = ["GatewayUnavailable", "ask_prefix"]


class GatewayUnavailable(Exception):
    """The gateway did not answer ``INFO`` in time: unreachable, or this key refused."""


def ask_prefix(endpoint: str, keys: ClientKeys, timeout_s: float = 10.0) -> str:
    """The gateway's return-address prefix; :class:`GatewayUnavailable` after ``timeout_s``."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = context.socket(zmq.DEALER)
    try:
        sock.setsockopt(zmq.LINGER, 0)
        # A refused handshake surfaces as an event on this socket, so say why when it can.
        monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        curve_client(sock, keys)
        sock.connect(endpoint)
        sock.send(verbs.INFO)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        refused = False
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            ready = dict(poller.poll(int(left * 1000) + 1))
            if monitor in ready:
                monitor.recv_multipart()
                refused = True
                break  # libzmq does not retry a refused handshake
            if sock in ready:
                reply = sock.recv_multipart()
                if len(reply) == 2 and reply[0] == verbs.PREFIX:
                    return reply[1].decode("utf-8", "replace")
        why = (
            "refused this host's key (add its .public line to the authorised-keys file)"
            if refused
            else "is the control host up, and its public key the one given?"
        )
        raise GatewayUnavailable(
            f"the worker gateway at {endpoint} {why}"
            if refused
            else f"the worker gateway at {endpoint} did not answer within {timeout_s:g} s: {why}"
        )
    finally:
        sock.disable_monitor()
        sock.close()
        context.destroy(linger=0)
