"""Sends fuzz messages to a running stack's sockets and keeps count of what it sent.

:class:`Attacker` connects one PUSH (a DEALER for a control socket) to each target and
sends every target its share in rounds of :data:`ROUND` messages, so that every
process is under attack at once. It reads the control sockets' replies as it goes (a
ROUTER whose client stops reading drops its replies). Sends block for at most
``timeout_s``: a receiver that stops reading fails the run instead of hanging it.
Sockets stay open until the attacker is closed, so that nothing still queued is lost on
close (``LINGER 0``): close it only once the receivers have counted everything.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from types import TracebackType

import zmq

from router_core.control.protocol import decode_reply
from tests.fault.harness.fuzz import Frames, Target, attack

__all__ = ["ROUND", "Attacker"]

#: Messages sent to one target before moving to the next.
ROUND = 500


class Attacker:
    """Fuzz sender for ``targets`` on ``context`` (see the module docstring)."""

    def __init__(
        self, context: zmq.Context[zmq.Socket[bytes]], targets: list[Target], timeout_s: float
    ) -> None:
        self.targets = targets
        self._context = context
        self._timeout_ms = int(timeout_s * 1000)
        self._sockets: dict[str, zmq.Socket[bytes]] = {}
        #: ``(process, reason)`` -> messages sent.
        self.sent: Counter[tuple[str, str]] = Counter()
        self.frames_by_target: Counter[str] = Counter()
        #: Replies read per control target, and how many were due (expired ones get none).
        self.replies: Counter[str] = Counter()
        self.replies_due: Counter[str] = Counter()
        self.error_replies: Counter[str] = Counter()

    def __enter__(self) -> Attacker:
        for target in self.targets:
            sock = self._context.socket(zmq.DEALER if target.control else zmq.PUSH)
            sock.setsockopt(zmq.SNDTIMEO, self._timeout_ms)
            sock.setsockopt(zmq.SNDHWM, 10_000)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.connect(target.endpoint)
            self._sockets[target.name] = sock
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._sockets.clear()

    def send(self, frames_per_target: int, seed: int) -> None:
        """Send each target whole messages until it got ``frames_per_target`` frames
        (``zmq.Again`` on a stuck one)."""
        rng = random.Random(seed)
        streams: dict[str, Iterator[tuple[Frames, str]]] = {
            t.name: attack(t, random.Random(rng.random())) for t in self.targets
        }
        while streams:
            for target in self.targets:
                stream = streams.get(target.name)
                if stream is None:
                    continue
                sock = self._sockets[target.name]
                for _ in range(ROUND):
                    if self.frames_by_target[target.name] >= frames_per_target:
                        del streams[target.name]
                        break
                    frames, reason = next(stream)
                    sock.send_multipart(frames, copy=len(frames) < 8)
                    self.sent[(target.process, reason)] += 1
                    self.frames_by_target[target.name] += len(frames)
                    if target.control and reason != "control_expired":
                        self.replies_due[target.name] += 1
                self.read_replies()

    def read_replies(self) -> bool:
        """Read every waiting control reply; whether all that are due have come."""
        for target in self.targets:
            if not target.control:
                continue
            sock = self._sockets[target.name]
            while sock.poll(0, zmq.POLLIN):
                frames = sock.recv_multipart()
                self.replies[target.name] += 1
                if not decode_reply(frames[-1]).ok:
                    self.error_replies[target.name] += 1
        return all(self.replies[name] >= due for name, due in self.replies_due.items())
