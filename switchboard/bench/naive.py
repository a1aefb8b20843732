"""The naive baseline of the backward split: the seed's design, pickle and all.

This module is the only place in Switchboard allowed to use pickle: it models SGLang's
``multi_tokenizer_mixin`` (the seed) so that the benchmark can compare against it. The
producer pickles the whole column batch; the router unpickles it, copies it field by
field into one object per request (the seed's ``_handle_output_by_index``: per field,
``None`` stays ``None``, a list is indexed and wrapped as a one-element list, a dict is
copied per key), pickles each and sends one message per request to its owner, whose
socket is created on first use (the seed's ``SocketMapping``); receivers unpickle. The
router loop is synchronous, which is faster than the seed's asyncio one.
"""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import field, make_dataclass
from multiprocessing.synchronize import Event
from typing import Any, Final

import msgspec
import zmq

from router_core.wire.outputs import BatchStrOutput
from switchboard.bench.batches import SplitPlan
from switchboard.bench.hops import BENCH_HWM
from switchboard.bench.procs import Report

__all__ = [
    "NaiveBatchStrOutput",
    "dumps",
    "handle_output_by_index",
    "loads",
    "produce_pickles",
    "receive_objects",
    "serve_naive_router",
    "to_naive",
]

#: The seed's ``BatchStrOutput``: a plain dataclass with the same fields as ours.
NaiveBatchStrOutput: Final[type[Any]] = make_dataclass(
    "NaiveBatchStrOutput",
    [("rids", list[str])]
    + [
        (name, Any, field(default=None))
        for name in BatchStrOutput.__struct_fields__
        if name != "rids"
    ],
)
# Pickle finds a class by module and name; make_dataclass would name its own module.
NaiveBatchStrOutput.__module__ = __name__

#: Fields the seed indexes without a length check (``check_length=False``).
_UNCHECKED: Final = frozenset(
    name
    for name in BatchStrOutput.__struct_fields__
    if "logprobs" in name
    or name
    in {
        "output_token_entropy_val",
        "output_hidden_states",
        "routed_experts",
        "indexer_topk",
        "token_steps",
        "customized_info",
        "dp_ranks",
    }
)

#: Fields the seed always sets to None in a per-request copy.
_DROPPED: Final = frozenset({"placeholder_tokens_idx", "placeholder_tokens_val"})

_COPIED: Final = tuple(
    (name, name not in _UNCHECKED)
    for name in BatchStrOutput.__struct_fields__
    if name != "rids" and name not in _DROPPED
)

_PROTOCOL: Final = pickle.HIGHEST_PROTOCOL


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` as the seed's ``send_pyobj`` does (highest protocol)."""
    return pickle.dumps(obj, _PROTOCOL)


def loads(data: bytes) -> Any:
    """Unpickle what :func:`dumps` made (the seed's ``recv_pyobj``)."""
    return pickle.loads(data)


def to_naive(batch: BatchStrOutput) -> Any:
    """The same batch as the seed's dataclass."""
    return NaiveBatchStrOutput(**msgspec.structs.asdict(batch))


def _extract_field_by_index(output: Any, name: str, index: int, check_length: bool) -> Any:
    """The seed's per-field copy of one request's entry."""
    value = getattr(output, name, None)
    if value is None:
        return None
    if isinstance(value, dict):
        copied = {}
        for key, values in value.items():
            copied[key] = [values[index]] if len(values) > index else [None]
        return copied
    if check_length and len(value) <= index:
        return None
    return [value[index]]


def handle_output_by_index(output: Any, index: int) -> Any:
    """One request's slice of ``output``, copied field by field as the seed does."""
    fields = {
        name: _extract_field_by_index(output, name, index, checked) for name, checked in _COPIED
    }
    return NaiveBatchStrOutput(rids=[output.rids[index]], **fields)


def produce_pickles(report: Report, entry: str, plan: SplitPlan, done: Event) -> None:
    """Pickle and PUSH ``plan.batches`` whole batches to the naive router."""
    batches = [to_naive(batch) for batch in plan.build()]
    context = zmq.Context()
    sock = context.socket(zmq.PUSH)
    try:
        sock.setsockopt(zmq.SNDHWM, BENCH_HWM)
        sock.connect(entry)
        send = sock.send
        for sent in range(plan.batches):
            send(dumps(batches[sent % len(batches)]))
        done.wait(60)
    finally:
        sock.close(linger=0)
        context.term()


def serve_naive_router(report: Report, entry: str) -> None:
    """Unpickle each batch, split it field by field, pickle and send each request."""
    context = zmq.Context()
    inbound = context.socket(zmq.PULL)
    mapping: dict[str, zmq.Socket[bytes]] = {}
    try:
        inbound.setsockopt(zmq.RCVHWM, BENCH_HWM)
        inbound.bind(entry)
        report.send(("ready", None))
        while True:
            batch = loads(inbound.recv())
            for index, owner in enumerate(batch.http_worker_ipcs):
                one = handle_output_by_index(batch, index)
                sock = mapping.get(owner)
                if sock is None:
                    sock = mapping[owner] = context.socket(zmq.PUSH)
                    sock.setsockopt(zmq.SNDHWM, BENCH_HWM)
                    sock.connect(owner)
                sock.send(dumps(one))
    finally:
        for sock in (inbound, *mapping.values()):
            sock.close(linger=0)
        context.term()


def receive_objects(report: Report, address: str, expected: int, idle_timeout_ms: int) -> None:
    """Bind ``address``, unpickle requests until ``expected`` arrived; report timing.

    Reports the same ``result`` shape as the Switchboard receivers.
    """
    context = zmq.Context()
    sock = context.socket(zmq.PULL)
    rows = misrouted = first_rows = first_ns = last_ns = 0
    mine = [address]
    try:
        sock.setsockopt(zmq.RCVHWM, BENCH_HWM)
        sock.setsockopt(zmq.RCVTIMEO, idle_timeout_ms)
        sock.bind(address)
        report.send(("ready", {"pid": os.getpid()}))
        recv = sock.recv
        try:
            while rows + misrouted < expected:
                one = loads(recv())
                if not first_ns:
                    first_ns = time.monotonic_ns()
                    first_rows = len(one.rids)
                if one.http_worker_ipcs == mine:
                    rows += len(one.rids)
                else:
                    misrouted += len(one.rids)
            last_ns = time.monotonic_ns()
        except zmq.Again:
            pass  # idle: report what arrived; the trial shows as incomplete
        report.send(
            (
                "result",
                {
                    "delivered": rows,
                    "misrouted": misrouted,
                    "first_rows": first_rows,
                    "first_ns": first_ns,
                    "last_ns": last_ns,
                },
            )
        )
    finally:
        sock.close(linger=0)
        context.term()
