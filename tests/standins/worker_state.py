"""The stand-in worker's protocol state and observations: no sockets, no clock.

:class:`StandInWorker` turns each inbound message into the messages to send back
(acknowledgements, registrations, heartbeats) and counts what it saw, so the process
around it (:mod:`tests.standins.worker`) is only sockets and timers. Its pause state is
the real worker's: a :class:`~router_core.worker_link.WorkerSession` applies every
registration reply and broadcast (their ordering by router incarnation and sequence is
what the barrier tests check), the stand-in only observes.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import msgspec

from router_core.wire import BATCH_KINDS, Kind, WireError, decode_header, decode_payload
from router_core.wire.codec import Frames, frame_message
from router_core.wire.control import (
    Deregistration,
    DrainCommand,
    Heartbeat,
    LoadSnapshot,
    PauseContinueBroadcast,
    RegistrationReply,
    WorkerRegistration,
    op_order,
)
from router_core.wire.requests import GenerateRequest, SamplingParams
from router_core.worker_link import WorkerIdentity, WorkerSession

__all__ = ["StandInWorker", "op_seq"]

Buffer = bytes | memoryview

#: What the stand-in counts, all reported to the test.
COUNTERS = (
    "reg_sent",
    "reg_replies",
    "reg_accepted",
    "reg_rejected",
    "last_op_seq",
    "ops_received",
    "ops_out_of_order",
    "acks_sent",
    "drain_commands",
    "heartbeats_sent",
    "rows",
    "output_messages",
    "misdelivered",
    "bad_rows",
    "bad_messages",
    "unexpected_kinds",
    "requests_sent",
    "finished",
    "duplicate_finishes",
    "loads_received",
    "freeze_gc",
)


def op_seq(op_id: str) -> int:
    """The barrier sequence number in an op id (``<incarnation>-<seq>``), or -1."""
    order = op_order(op_id)
    return -1 if order is None else order[1]


class StandInWorker:
    """What a worker knows and has seen; every method returns the frames to send."""

    def __init__(
        self,
        worker_id: str,
        address: str,
        *,
        requests: int = 0,
        after_load: bool = False,
        max_new_tokens: int = 1,
        key: str = "",
    ) -> None:
        """``requests`` GENERATE requests (prompt ``[1, 2, 3, index]``, ``max_new_tokens``)
        go out once registered, or (``after_load``) once the first load snapshot shows
        that the engine is up. ``key`` is the stack key it registers with; the secret of
        its accepted registration goes in its heartbeats, acknowledgements and
        deregistration."""
        self.max_new_tokens = max_new_tokens
        self.worker_id = worker_id
        self.address = address
        self.key = key
        self.secret = ""
        self.started_ns = time.time_ns()
        self.registered = False
        self.registration_pending = False
        #: The real worker's pause logic; the stand-in reads its state from it.
        self.session = WorkerSession(
            WorkerIdentity(
                worker_id,
                address,
                pid=os.getpid(),
                host=socket.gethostname(),
                version="standin",
                started_ns=self.started_ns,
            ),
            key=key,
        )
        self.draining = False
        self.inflight: set[str] = set()
        self.requests_wanted = requests
        self.requests_after_load = after_load
        self.requests_started = False
        self.requests_left = 0
        self.heartbeat_seq = 0
        self.obs: dict[str, Any] = dict.fromkeys(COUNTERS, 0)
        self.obs.update(
            address=address,
            reg_op_id=None,
            reg_paused=None,
            last_op_id="",
            last_op_is_pause=None,
            last_load=None,
        )
        self.rows_by_rid: Counter[str] = Counter()
        self.messages_by_kind: Counter[str] = Counter()
        self.finished_rids: set[str] = set()
        #: Every token row's ``output_ids`` concatenated, and each finish reason, by rid.
        self.output_ids_by_rid: dict[str, list[int]] = {}
        self.finish_reasons: dict[str, Any] = {}
        #: The ``output_strs`` of every text row of this worker's own requests, by rid.
        self.text_by_rid: dict[str, str] = {}

    # ------------------------------------------------------------------ views

    @property
    def paused(self) -> bool:
        """Paused, as the real session decided."""
        return self.session.paused

    @property
    def pause_mode(self) -> str | None:
        return self.session.pause_mode

    @property
    def state(self) -> str:
        """The state this worker reports in heartbeats."""
        if not self.registered:
            return "starting"
        if self.draining:
            return "draining" if self.inflight else "drained"
        return "paused" if self.paused else "serving"

    def snapshot(self) -> dict[str, Any]:
        """Everything the test may assert on."""
        return {
            **self.obs,
            "state": self.state,
            "registered": self.registered,
            "paused": self.paused,
            "pause_mode": self.pause_mode,
            "draining": self.draining,
            "inflight": len(self.inflight),
            "rows_by_rid": dict(self.rows_by_rid),
            "messages_by_kind": dict(self.messages_by_kind),
            "output_ids_by_rid": {rid: list(ids) for rid, ids in self.output_ids_by_rid.items()},
            "finish_reasons": dict(self.finish_reasons),
            "text_by_rid": dict(self.text_by_rid),
        }

    def fingerprint(self) -> tuple[Any, ...]:
        """What counts as a change of state, reported at once."""
        return (self.state, self.paused, self.obs["last_op_id"], self.obs["reg_replies"])

    # ------------------------------------------------------------------ outbound

    def registration(self) -> Frames:
        self.obs["reg_sent"] += 1
        self.registration_pending = True
        registration = WorkerRegistration(
            worker_id=self.worker_id,
            address=self.address,
            pid=os.getpid(),
            host=socket.gethostname(),
            version="standin",
            started_ns=self.started_ns,
            key=self.key,
        )
        return frame_message(Kind.REGISTER, registration)

    def heartbeat(self, state: str | None = None) -> Frames:
        self.heartbeat_seq += 1
        self.obs["heartbeats_sent"] += 1
        beat = Heartbeat(
            worker_id=self.worker_id,
            seq=self.heartbeat_seq,
            state=state or self.state,  # type: ignore[arg-type]
            inflight=len(self.inflight),
            address=self.address,
            secret=self.secret,
        )
        return frame_message(Kind.HEARTBEAT, beat)

    def deregistration(self) -> Frames:
        leaving = Deregistration(self.worker_id, "shutdown", secret=self.secret)
        return frame_message(Kind.DEREGISTER, leaving)

    def next_request(self) -> Frames:
        """One GENERATE request, counted as in flight until a finished row arrives."""
        index = self.obs["requests_sent"]
        rid = f"{self.worker_id}-req-{index}"
        request = GenerateRequest(
            rid=rid,
            input_ids=[1, 2, 3, index],
            sampling_params=SamplingParams(max_new_tokens=self.max_new_tokens),
            created_ns=time.time_ns(),
        )
        self.inflight.add(rid)
        self.obs["requests_sent"] += 1
        self.requests_left -= 1
        return frame_message(Kind.GENERATE, request, rids=[rid], reply_to=[self.address])

    # ------------------------------------------------------------------ inbound

    def on_message(self, frames: Sequence[Buffer]) -> list[Frames]:
        """Apply one inbound message; return what to send in answer."""
        try:
            header = decode_header(frames[0])
        except WireError:
            self.obs["bad_messages"] += 1
            return []
        self.messages_by_kind[header.kind.name] += 1
        if header.kind in BATCH_KINDS:
            self.on_batch(header.kind, header.rids, header.reply_to, frames[1:])
            return []
        try:
            (payload,) = [decode_payload(header.kind, frame) for frame in frames[1:]]
        except (WireError, ValueError):
            self.obs["bad_messages"] += 1
            return []
        if isinstance(payload, RegistrationReply):
            return self.on_registration_reply(payload)
        if isinstance(payload, PauseContinueBroadcast):
            return self.on_pause_broadcast(payload)
        if isinstance(payload, DrainCommand):
            return self.on_drain(payload)
        if isinstance(payload, LoadSnapshot):
            self.obs["loads_received"] += 1
            self.obs["last_load"] = msgspec.to_builtins(payload)
            if self.requests_after_load and self.registered:
                self.start_requests()
        elif header.kind is Kind.FREEZE_GC:
            self.obs["freeze_gc"] += 1
        else:
            self.obs["unexpected_kinds"] += 1
        return []

    def on_registration_reply(self, reply: RegistrationReply) -> list[Frames]:
        self.obs["reg_replies"] += 1
        if not reply.accepted:
            self.obs["reg_rejected"] += 1
            self.registered = False
            return [self.registration()]
        self.obs["reg_accepted"] += 1
        self.secret = reply.secret
        self.obs["reg_op_id"] = reply.op_id
        self.obs["reg_paused"] = reply.paused
        first = self.obs["reg_accepted"] == 1
        self.registered = True
        self.registration_pending = False
        self.session.on_registration_reply(reply)
        if reply.op_id and op_seq(reply.op_id) >= self.obs["last_op_seq"]:
            self.obs["last_op_id"] = reply.op_id
            self.obs["last_op_seq"] = op_seq(reply.op_id)
            self.obs["last_op_is_pause"] = reply.paused
        if first and not self.requests_after_load:
            self.start_requests()
        return []

    def start_requests(self) -> None:
        if not self.requests_started:
            self.requests_started = True
            self.requests_left = self.requests_wanted

    def on_pause_broadcast(self, op: PauseContinueBroadcast) -> list[Frames]:
        self.obs["ops_received"] += 1
        seq = op_seq(op.op_id)
        before, order = self.session.last_op, op_order(op.op_id)
        if before is not None and order is not None and order < before:
            self.obs["ops_out_of_order"] += 1
        replies = self.session.on_pause_broadcast(op)  # the real ordering decides
        self.obs["last_op_id"] = op.op_id
        self.obs["last_op_seq"] = max(seq, self.obs["last_op_seq"])
        self.obs["last_op_is_pause"] = op.is_pause
        self.obs["acks_sent"] += len(replies)
        return replies

    def on_drain(self, command: DrainCommand) -> list[Frames]:
        self.obs["drain_commands"] += 1
        out = []
        if command.drain and not self.draining and self.registered:
            # Pass through draining as a real worker does, even when already empty; the
            # process then reports drained (a change of state) in the next heartbeat.
            out.append(self.heartbeat(state="draining"))
        self.draining = command.drain
        return out

    def on_batch(
        self, kind: Kind, rids: list[str], reply_to: list[str], rows: Sequence[Buffer]
    ) -> None:
        self.obs["output_messages"] += 1
        self.obs["rows"] += len(rids)
        for rid, owner, frame in zip(rids, reply_to, rows, strict=True):
            self.rows_by_rid[rid] += 1
            if owner != self.address:
                self.obs["misdelivered"] += 1
            try:
                row: Any = decode_payload(kind, frame)
            except WireError:
                self.obs["bad_rows"] += 1
                continue
            if row.rids != [rid] or row.http_worker_ipcs not in (None, [owner]):
                self.obs["bad_rows"] += 1
            if kind is Kind.TOKEN_BATCH and row.output_ids:
                self.output_ids_by_rid.setdefault(rid, []).extend(row.output_ids[0])
            if kind is Kind.STR_BATCH and row.output_strs and rid in self.inflight:
                self.text_by_rid[rid] = self.text_by_rid.get(rid, "") + row.output_strs[0]
            reasons = row.finished_reasons
            if reasons and reasons[0] is not None:
                if rid in self.finished_rids:
                    self.obs["duplicate_finishes"] += 1
                else:
                    self.finished_rids.add(rid)
                    self.finish_reasons[rid] = reasons[0]
                    self.obs["finished"] += 1
                self.inflight.discard(rid)
