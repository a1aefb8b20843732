"""Sockets a test owns: short timeouts so a hang fails, closed and unlinked at teardown."""

from __future__ import annotations

import zmq

from router_core.transport import close_bound

__all__ = ["SocketFactory"]


class SocketFactory:
    """Test-owned sockets, all closed (and their socket files removed) at teardown."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self.context = context
        self._owned: list[tuple[zmq.Socket[bytes], str | None]] = []

    def _socket(self, kind: int, *, rcvtimeo_ms: int = 5000) -> zmq.Socket[bytes]:
        sock = self.context.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, rcvtimeo_ms)
        sock.setsockopt(zmq.SNDTIMEO, 5000)
        return sock

    def bound(self, kind: int, endpoint: str) -> zmq.Socket[bytes]:
        sock = self._socket(kind)
        sock.bind(endpoint)
        self._owned.append((sock, endpoint))
        return sock

    def connected(self, kind: int, endpoint: str, hwm: int = 100_000) -> zmq.Socket[bytes]:
        sock = self._socket(kind)
        sock.setsockopt(zmq.SNDHWM, hwm)
        sock.setsockopt(zmq.RCVHWM, hwm)
        sock.connect(endpoint)
        self._owned.append((sock, None))
        return sock

    def close(self) -> None:
        for sock, endpoint in self._owned:
            if endpoint is None:
                sock.close(linger=0)
            else:
                close_bound(sock, endpoint)
        self._owned.clear()
