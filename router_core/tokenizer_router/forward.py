"""The forward hop: workers' requests to the engine, decided from the header alone.

The C fast path moves what it can prove well-formed and untraced; every other message,
and everything when the fast path is unavailable, takes the Python path, which validates
it, makes the hop's span when the request carries a (sampled) trace context, and
rewrites that context so the engine's span is the router span's child. Either way the
hop is counted per owning worker (messages, bytes) and its latency observed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import msgspec
import zmq

from router_core import fastpath, tracing
from router_core.counters import Counters
from router_core.destinations import Destination
from router_core.inbound import BUDGET, accept, drain
from router_core.traffic import FORWARD, HOP_BOUNDS_NS, TrafficStats, message_bytes
from router_core.transport import FrameLike
from router_core.wire import DATA_KINDS, Header, encode_header
from router_core.wire.kinds import KIND_LABELS, kind_label

__all__ = ["ForwardHop"]


#: The span of one forwarded request (role-based name, see docs/observability.md).
SPAN_NAME: Final = "tokenizer-router forward"


class ForwardHop:
    """Moves requests from the workers' socket to the engine; owned by the router's loop.

    ``worker_of`` maps a worker's return address to its id (``"unknown"`` if it has none),
    the label its traffic is counted under.
    """

    def __init__(
        self,
        engine: Destination,
        counters: Counters,
        traffic: TrafficStats,
        worker_of: Callable[[str], str],
    ) -> None:
        self._engine = engine
        self._counters = counters
        self._traffic = traffic
        self._worker_of = worker_of
        self._fast = fastpath.load(DATA_KINDS)

    def drain(self, sock: zmq.Socket[bytes]) -> None:
        """Forward until the budget is spent, the socket is empty or the engine pushes back."""
        fast, engine = self._fast, self._engine
        budget = BUDGET
        while budget > 0 and not engine.backlog:
            if fast is None:
                if drain(sock, self.on_request, self._counters, 1) == 0:
                    return
                budget -= 1
                continue
            result = fast.forward(
                sock,
                engine.socket,
                budget,
                bounds_ns=HOP_BOUNDS_NS,
                untraced_only=tracing.enabled(),
            )
            for code, count in zip(fast.kinds, result.counts, strict=True):
                if count:
                    self._counters.add("forwarded", KIND_LABELS[code], count)
                    budget -= count
            for address, messages, nbytes in result.sources:
                worker = self._worker_of(address.decode("ascii"))
                self._traffic.add(FORWARD, worker, messages, nbytes)
            self._traffic.add_hop_counts(FORWARD, result.latency_counts, result.latency_sum_s)
            if result.frames is None:
                if result.status == fastpath.BUDGET and budget > 0:
                    continue  # the per-call worker table filled up: read it and go on
                return  # the socket is empty or the budget is spent
            # HANDOFF (not provably well-formed, or traced) or BLOCKED (the engine pushed
            # back): the Python path validates it and, if blocked, queues it.
            budget -= 1
            accept(list(result.frames), self.on_request, self._counters)

    def on_request(self, header: Header, frames: list[FrameLike]) -> None:
        """The Python path for one validated message."""
        if header.kind not in DATA_KINDS:
            self._counters.add("rejected", "unexpected_kind")
            return
        now_ns = time.time_ns()
        if tracing.enabled() and tracing.is_sampled(header.traceparent):
            with tracing.hop_span(
                SPAN_NAME,
                header.traceparent,
                kind="consumer",
                attributes={"switchboard.kind": kind_label(header.kind)},
            ) as span:
                frames = _with_traceparent(header, frames, tracing.traceparent_of(span))
                self._send(header, frames, now_ns)
        else:
            self._send(header, frames, now_ns)

    def _send(self, header: Header, frames: list[FrameLike], now_ns: int) -> None:
        if not self._engine.send(frames):
            return
        self._counters.add("forwarded", kind_label(header.kind))
        worker = self._worker_of(header.reply_to[0]) if header.reply_to else "unknown"
        self._traffic.add(FORWARD, worker, 1, message_bytes(frames))
        self._traffic.observe_hop(FORWARD, header.sent_ns, now_ns)


def _with_traceparent(header: Header, frames: list[FrameLike], traceparent: str) -> list[FrameLike]:
    """The message with its header's trace context replaced (payload frames untouched)."""
    if traceparent == header.traceparent:
        return frames
    rewritten = msgspec.structs.replace(header, traceparent=traceparent)
    return [encode_header(rewritten), *frames[1:]]
