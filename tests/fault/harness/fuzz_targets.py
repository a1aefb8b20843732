"""Every socket a stack's processes bind, as fuzz :class:`Target` values.

The layout is the supervisor's (``switchboard/supervisor/layout.py``, the endpoints of
``router_core/endpoints.py``): the tokenizer router's ``requests``, ``workers``,
``engine_events``, ``outputs`` and ``control``; the detokenizer router's ``inbound`` and
``control``; each detokenizer's PULL; the engine link's PULL; each worker link's PULL.
The admin app and the supervisor bind none. Templates are real messages of the kinds a
socket receives; extras are refused past the header checks for a reason the protocol
names (``docs/protocol.md``, section 7.2). No message here is one a receiver would act
on: nothing is generated, registered, paused or acknowledged.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from router_core.control.protocol import ControlRequest, encode
from router_core.credentials import KEY_FILE, read_key
from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints, worker_address
from router_core.wire import Kind, frame_batch
from router_core.wire.codec import encode_header, frame_message
from router_core.wire.control import (
    Acknowledgement,
    Heartbeat,
    LoadSnapshot,
    UpstreamIncarnation,
    WorkerRegistration,
)
from router_core.wire.header import Header
from router_core.wire.outputs import BatchStrOutput, BatchTokenIDOutput
from router_core.wire.requests import AbortRequest, GenerateRequest
from router_core.worker_link.dispatch import worker_frame_count
from tests.fault.harness.fuzz import Frames, Target

__all__ = ["stack_targets"]

#: Not a payload of any kind.
GARBAGE = b"\xc1 not msgpack"


def _with_garbage(kind: Kind, rids: list[str], reply_to: list[str]) -> Frames:
    """A valid header of ``kind`` whose payload frames do not decode."""
    count = len(rids) if rids else 1
    return [encode_header(Header(kind, rids, reply_to)), *([GARBAGE] * count)]


#: A MessagePack value nested deeper than any decoder goes (it recurses once per level,
#: and Python allows about a thousand): one-element arrays around a nil.
DEEP = b"\x91" * 2_000 + b"\xc0"


def _deep_header(frames: Frames) -> Frames:
    """``frames`` with one more header element, nested :data:`DEEP`ly (a decoder skips an
    extra element, and skipping recurses as decoding does)."""
    header = frames[0]
    return [bytes([header[0] + 1]) + header[1:] + DEEP, *frames[1:]]


def _deep_payload(
    kind: Kind, payload: dict[str, object], rids: list[str], reply_to: list[str]
) -> Frames:
    """A valid header of ``kind`` and a payload map with one unknown key whose value is
    nested :data:`DEEP`ly."""
    body = msgspec.msgpack.encode(payload)
    deep = bytes([body[0] + 1]) + body[1:] + b"\xa4deep" + DEEP  # one more map entry
    return [encode_header(Header(kind, rids, reply_to)), deep]


#: A valid request frame, for mutations.
STATUS_REQUEST = [encode(ControlRequest(id=9, command="status"))]


def _control_extras(key: str) -> tuple[tuple[Frames, str], ...]:
    """Refused control requests; those meant to pass the key check carry ``key``."""
    return (
        ([encode(ControlRequest(id=1, command="no_such_command", key=key))], "unknown_command"),
        (
            [encode(ControlRequest(id=2, command="status", args={"x": 1}, key=key))],
            "control_arguments",
        ),
        (
            [encode(ControlRequest(id=3, command="status", deadline_ns=1, key=key))],
            "control_expired",
        ),
        ([encode(ControlRequest(id=6, command="pause", key="0" * 64))], "control_unauthorized"),
        ([msgspec.msgpack.encode({"id": "one"})], "control_request"),
        ([b"", b"\x01", encode(ControlRequest(id=4, command="status"))], "control_envelope"),
        ([_deep_args_request()], "control_request"),
    )


def _deep_args_request() -> bytes:
    """A status request whose ``args`` hold a value nested :data:`DEEP`ly."""
    request = msgspec.msgpack.encode({"id": 5, "command": "status", "args": {}})
    return request.replace(b"\xa4args\x80", b"\xa4args\x81\xa1x" + DEEP)


def _peer_extras(
    run_dir: Path, workers: list[str], key: str
) -> tuple[tuple[tuple[Frames, str], ...], tuple[tuple[Frames, str], ...]]:
    """Messages the router refuses for who sent them (``docs/protocol.md``, section 5.14):
    for its ``workers`` socket and for ``engine_events``. A bad worker id is refused with
    no reply; the rest only when the stack has a key (they carry none). The keyless
    registration names a real worker's address, so the refusal gets no reply either."""
    forged_id = frame_message(Kind.REGISTER, WorkerRegistration("bad\nid", f"ipc://{run_dir}/x"))
    to_workers: list[tuple[Frames, str]] = [(forged_id, "bad_worker_id")]
    to_events: list[tuple[Frames, str]] = []
    if key:
        beacon = UpstreamIncarnation("detokenizer-0", 2**62)
        to_workers.append((frame_message(Kind.UPSTREAM, beacon), "bad_upstream_key"))
        if workers:
            keyless = WorkerRegistration("ghost", worker_address(run_dir, workers[0]))
            to_workers.append((frame_message(Kind.REGISTER, keyless), "bad_key"))
        forged_load = LoadSnapshot(step=1, engine_started_ns=2**62)
        forged_ack = Acknowledgement(op_id="fuzz-3", participant="engine")
        to_events.append((frame_message(Kind.LOAD, forged_load), "bad_engine_key"))
        to_events.append((frame_message(Kind.ACK, forged_ack), "bad_engine_key"))
    return tuple(to_workers), tuple(to_events)


def stack_targets(run_dir: Path, workers: list[str], detokenizers: int) -> list[Target]:
    """Every bound socket of a stack in ``run_dir`` with ``workers`` (ids) and
    ``detokenizers`` detokenizers."""
    router = RouterEndpoints.in_run_dir(run_dir)
    detok = DetokenizerRouterEndpoints.in_run_dir(run_dir, detokenizers)
    # The stack's key lets the control extras past the key check (none: a stack without).
    key = read_key(run_dir / KEY_FILE) if (run_dir / KEY_FILE).exists() else ""
    ghost = worker_address(run_dir, "ghost")
    generate = frame_message(
        Kind.GENERATE, GenerateRequest(rid="g", input_ids=[1, 2]), rids=["g"], reply_to=[ghost]
    )
    abort = frame_message(Kind.ABORT, AbortRequest(rid="g"), rids=["g"], reply_to=[ghost])
    heartbeat = frame_message(Kind.HEARTBEAT, Heartbeat(worker_id="ghost"))
    load = frame_message(Kind.LOAD, LoadSnapshot(step=1))
    ack = frame_message(Kind.ACK, Acknowledgement(op_id="fuzz-1", participant="ghost"))
    idle = frame_message(Kind.IDLE, None)
    str_rows = frame_batch(
        BatchStrOutput(rids=["a", "b"], http_worker_ipcs=[ghost, ghost], output_strs=["x", "y"])
    )
    token_rows = frame_batch(
        BatchTokenIDOutput(rids=["a"], http_worker_ipcs=[ghost], output_ids=[[5]])
    )
    other_rid = frame_batch(
        BatchTokenIDOutput(rids=["b"], http_worker_ipcs=[ghost], output_ids=[[5]])
    )
    mismatched_rid = [
        encode_header(Header(Kind.GENERATE, ["g"], [ghost])),
        msgspec.msgpack.encode(GenerateRequest(rid="other", input_ids=[1])),
    ]
    engine_ack = frame_message(Kind.ACK, Acknowledgement(op_id="fuzz-2", participant="engine"))
    workers_extras, events_extras = _peer_extras(run_dir, workers, key)
    targets = [
        Target(
            "router.requests",
            router.requests,
            "tokenizer_router",
            templates=(generate, abort),
            extras=(
                (heartbeat, "unexpected_kind"),
                (str_rows, "unexpected_kind"),
                (_deep_header(generate), "too_deep"),
            ),
        ),
        Target(
            "router.workers",
            router.workers,
            "tokenizer_router",
            templates=(heartbeat, ack),
            extras=(
                (_with_garbage(Kind.HEARTBEAT, [], []), "bad_payload"),
                (generate, "unexpected_kind"),
                (load, "unexpected_kind"),
                (engine_ack, "ack_impersonation"),
                (_deep_header(heartbeat), "too_deep"),
                (_deep_payload(Kind.HEARTBEAT, {"worker_id": "ghost"}, [], []), "too_deep"),
                *workers_extras,
            ),
        ),
        Target(
            "router.engine_events",
            router.engine_events,
            "tokenizer_router",
            templates=(load, ack),
            extras=(
                (_with_garbage(Kind.LOAD, [], []), "bad_payload"),
                (_with_garbage(Kind.ACK, [], []), "bad_payload"),
                (ack, "ack_impersonation"),
                (generate, "unexpected_kind"),
                (_deep_header(load), "too_deep"),
                (_deep_payload(Kind.LOAD, {"step": 1}, [], []), "too_deep"),
                *events_extras,
            ),
        ),
        Target(
            "router.outputs",
            router.outputs,
            "tokenizer_router",
            templates=(str_rows, idle),
            extras=(
                (generate, "unexpected_kind"),
                (heartbeat, "unexpected_kind"),
                (_deep_header(str_rows), "too_deep"),
            ),
        ),
        Target(
            "router.control",
            router.control,
            "tokenizer_router",
            control=True,
            templates=(STATUS_REQUEST,),
            extras=_control_extras(key),
        ),
        Target(
            "detok-router.inbound",
            detok.inbound,
            "detokenizer_router",
            templates=(token_rows, idle),
            extras=(
                (generate, "unexpected_kind"),
                (load, "unexpected_kind"),
                (_deep_header(token_rows), "too_deep"),
            ),
        ),
        Target(
            "detok-router.control",
            detok.control,
            "detokenizer_router",
            control=True,
            templates=(STATUS_REQUEST,),
            extras=_control_extras(key),
        ),
        Target(
            "engine",
            router.engine,
            "engine",
            templates=(generate, abort),
            extras=(
                (_with_garbage(Kind.GENERATE, ["g"], [ghost]), "bad_payload"),
                (mismatched_rid, "rid_mismatch"),
                (token_rows, "unexpected_kind"),
                (heartbeat, "unexpected_kind"),
                (_deep_header(generate), "too_deep"),
                (
                    _deep_payload(Kind.GENERATE, {"rid": "g", "input_ids": [1]}, ["g"], [ghost]),
                    "too_deep",
                ),
            ),
        ),
    ]
    for index, endpoint in enumerate(detok.detokenizers):
        targets.append(
            Target(
                f"detokenizer-{index}",
                endpoint,
                "detokenizer",
                templates=(token_rows,),
                extras=(
                    (_with_garbage(Kind.TOKEN_BATCH, ["a"], [ghost]), "bad_payload"),
                    ([token_rows[0], other_rid[1]], "bad_payload"),
                    (generate, "unexpected_kind"),
                    (_deep_header(token_rows), "too_deep"),
                    # A detokenizer counts any row that does not decode as bad_payload.
                    (
                        _deep_payload(Kind.TOKEN_BATCH, {"rids": ["a"]}, ["a"], [ghost]),
                        "bad_payload",
                    ),
                ),
            )
        )
    for worker_id in workers:
        targets.append(
            Target(
                f"worker-{worker_id}",
                worker_address(run_dir, worker_id),
                "worker",
                templates=(str_rows, load),
                extras=(
                    (_with_garbage(Kind.LOAD, [], []), "bad_payload"),
                    (_with_garbage(Kind.PAUSE_BROADCAST, [], []), "bad_payload"),
                    (generate, "unexpected_kind"),
                    (_deep_header(load), "too_deep"),
                    (_deep_payload(Kind.LOAD, {"step": 1}, [], []), "too_deep"),
                ),
                frame_count=worker_frame_count,
            )
        )
    return targets
