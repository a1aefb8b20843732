"""Is the engine stepping? Ask it directly, the way a worker would, bypassing the router.

The engine holds its pause state, and shows it only by not stepping: while paused, a
request it receives waits (``switchboard/engine/scheduler.py``). :func:`engine_steps`
binds a PULL at a worker-like address in the run directory, sends the engine one
two-token GENERATE whose ``reply_to`` is that address, and waits: a row back (through
the detokenizer router and a detokenizer, as any output) means the engine is stepping;
none within ``wait_s`` means it is paused. The probe's request is then aborted, so a
later continue does not run it, and the socket file is removed.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import zmq

from router_core.endpoints import RouterEndpoints, worker_address
from router_core.wire import Kind, decode_header
from router_core.wire.codec import frame_message
from router_core.wire.requests import AbortRequest, GenerateRequest, SamplingParams

__all__ = ["engine_steps"]

_NUMBERS = itertools.count()


def engine_steps(
    context: zmq.Context[zmq.Socket[bytes]], run_dir: Path, wait_s: float = 2.0
) -> bool:
    """Whether the engine in ``run_dir`` answers a request within ``wait_s``."""
    rid = f"engine-probe-{next(_NUMBERS)}"
    address = worker_address(run_dir, "engine-probe")
    inbox = context.socket(zmq.PULL)
    engine = context.socket(zmq.PUSH)
    try:
        inbox.bind(address)
        engine.setsockopt(zmq.SNDTIMEO, 2000)
        engine.connect(RouterEndpoints.in_run_dir(run_dir).engine)
        request = GenerateRequest(
            rid=rid, input_ids=[11, 12, 13], sampling_params=SamplingParams(max_new_tokens=2)
        )
        engine.send_multipart(frame_message(Kind.GENERATE, request, rids=[rid], reply_to=[address]))
        answered = False
        while inbox.poll(int(wait_s * 1000), zmq.POLLIN):
            header = decode_header(inbox.recv_multipart()[0])
            if rid in header.rids:
                answered = True
                break
        abort = AbortRequest(rid=rid, reason="probe done")
        engine.send_multipart(frame_message(Kind.ABORT, abort, rids=[rid], reply_to=[address]))
        return answered
    finally:
        engine.close(linger=1000)
        inbox.close(linger=0)
        Path(address.removeprefix("ipc://")).unlink(missing_ok=True)
