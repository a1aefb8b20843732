"""An engine that breaks one duty on purpose, for the tests of ``switchboard engine-check``.

Run as an engine command: ``python -m tests.standins.broken_engine [--break DUTY]``. It
reads its endpoints, key and vocabulary from the ``SWITCHBOARD_ENGINE_*`` /
``SWITCHBOARD_*`` variables of the engine-command contract, and otherwise behaves as
``examples/echo_engine.py`` does on the engine link (one token a step, echoing the
prompt's ids), plus the stop rules every engine applies
(:func:`switchboard.engine.stopping.finish_reason`: stop ids, the vocabulary file's EOS,
stop strings decoded by the file's rule). With ``--break DUTY`` it breaks exactly that
duty (:data:`BREAKS`); without, it conforms. SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import zmq

from router_core import Command, EngineEndpoints, EngineInput, EngineLink, Request
from router_core.control.command_args import FlushCacheArgs
from router_core.control.replies import FlushCacheReply
from router_core.wire import Kind, frame_batch, frame_message
from router_core.wire.control import (
    ENGINE,
    Acknowledgement,
    ContinueRequest,
    FreezeGC,
    LoadSnapshot,
    PauseRequest,
)
from router_core.wire.engine_commands import EngineCommand, ReplyCode
from router_core.wire.outputs import BatchEmbeddingOutput, BatchTokenIDOutput
from router_core.wire.requests import (
    AbortRequest,
    EmbeddingRequest,
    GenerateRequest,
    SamplingParams,
)
from switchboard.engine.stopping import finish_reason
from switchboard.text.vocab_file import VocabFile, decode_ids, read_vocab_file

#: Each duty this engine can break: what it then does wrong.
BREAKS: Final = {
    "no_load": "never publishes a LOAD",
    "no_engine_started_ns": "publishes LOADs with engine_started_ns 0",
    "no_secret_in_load": "publishes LOADs without the stack key",
    "same_started_ns": "gives every incarnation the same engine_started_ns",
    "cumulative_output_ids": "sends every id so far in every row",
    "no_completion_tokens": "sends rows without completion_tokens",
    "wrong_prompt_tokens": "counts one prompt token too many",
    "wrong_owner": "sends rows to another return address",
    "one_row_per_message": "sends each request's row as a message of its own",
    "undecodable_rows": "sends each batch with one frame too many",
    "ignores_max_new_tokens": "generates its own --tokens whatever max_new_tokens says",
    "ignores_stop_ids": "does not stop on stop_token_ids",
    "ignores_stop_strings": "does not stop on stop strings",
    "ignores_eos": "does not stop on EOS",
    "no_abort_row": "drops an aborted request without a row",
    "ignores_pause": "acknowledges PAUSE but keeps stepping",
    "no_ack": "never acknowledges PAUSE or CONTINUE",
    "no_secret_in_ack": "acknowledges without the stack key",
    "no_embed_answer": "never answers an EMBED",
    "crashes_on_bad_frame": "exits when a message does not decode",
    "hangs_after_freeze_gc": "stops stepping after FREEZE_GC",
    "no_command_reply": "never answers an ENGINE_COMMAND",
    "flushes_while_running": "answers flush_cache ok while requests run unpaused",
}
MAX_RUNNING: Final = 64
#: The engine_started_ns of every incarnation with --break same_started_ns.
FIXED_STARTED_NS: Final = 1_700_000_000_000_000_000
#: When this process started (what the link would stamp), for LOADs sent around it.
STARTED_NS: Final = time.time_ns()


@dataclass
class Running:
    """A generation in progress."""

    rid: str
    owner: str
    prompt: list[int]
    params: SamplingParams
    output_ids: list[int] = field(default_factory=list)


class BrokenEngine:
    """The echo engine's scheduler with the stop rules and one duty broken."""

    def __init__(
        self,
        link: EngineLink,
        raw: tuple[zmq.Socket[bytes], zmq.Socket[bytes]],
        vocab: VocabFile,
        args: Any,
    ) -> None:
        self.link, self.vocab = link, vocab
        # Sockets of its own to events and outputs, for what the link would not send.
        self.raw_events, self.raw_outputs = raw
        self.tokens: int = args.tokens
        self.broken: str = args.broken or ""
        self.key = os.environ.get("SWITCHBOARD_STACK_KEY", "")
        self.running: dict[tuple[str, str], Running] = {}
        self.paused = self.frozen = False
        self.steps = 0
        self.rejected_seen = 0

    def handle(self, item: EngineInput) -> None:
        match item:
            case Request(payload=GenerateRequest() as generate):
                running = Running(
                    item.rid, item.reply_to, generate.input_ids, generate.sampling_params
                )
                self.running[item.reply_to, item.rid] = running
            case Request(payload=EmbeddingRequest() as embed):
                if self.broken != "no_embed_answer":
                    self.embed(item, embed)
            case Request(payload=AbortRequest() as abort):
                keys = [(item.reply_to, item.rid)]
                if abort.abort_all:
                    keys = [key for key in self.running if key[0] == item.reply_to]
                aborted = [self.running.pop(key) for key in keys if key in self.running]
                if self.broken != "no_abort_row":
                    self.finish(aborted, {"type": "abort", "message": abort.reason})
            case Command(payload=PauseRequest() as pause):
                if pause.mode == "abort" and self.broken != "ignores_pause":
                    self.finish(list(self.running.values()), {"type": "abort", "message": "paused"})
                    self.running.clear()
                self.paused = self.broken != "ignores_pause"
                self.acknowledge(pause.op_id)
            case Command(payload=ContinueRequest() as resume):
                self.paused = False
                self.acknowledge(resume.op_id)
            case Command(payload=FreezeGC() as freeze):
                gc.freeze()
                self.link.forward_freeze_gc(freeze)
                self.frozen = self.broken == "hangs_after_freeze_gc"
            case Command(payload=EngineCommand() as command):
                self.carry_out(command, item)

    def carry_out(self, command: EngineCommand, item: Command) -> None:
        """Answer an operator's command once, as examples/echo_engine.py does (unless
        broken): flush_cache, refused while requests run unpaused; others unknown."""
        if self.broken == "no_command_reply":
            return
        if not isinstance(item.args, FlushCacheArgs):
            bad = item.problem.startswith("bad_arguments")
            code: ReplyCode = "bad_arguments" if bad else "unknown_command"
            self.link.answer_command(command.op_id, code=code, message=item.problem)
        elif self.running and not self.paused and self.broken != "flushes_while_running":
            rids = ", ".join(rid for _, rid in self.running)
            message = f"{len(self.running)} requests are running ({rids})"
            self.link.answer_command(command.op_id, code="conflict", message=message)
        else:
            self.link.answer_command(command.op_id, FlushCacheReply(dropped_tokens=0))

    def check_rejected(self) -> None:
        """With --break crashes_on_bad_frame, exit once the link refused a message."""
        rejected = sum(self.link.counters.snapshot().get("rejected", {}).values())
        if self.broken == "crashes_on_bad_frame" and rejected:
            raise SystemExit(f"broken engine: a bad frame ({rejected} refused)")

    def acknowledge(self, op_id: str) -> None:
        if self.broken == "no_ack":
            return
        if self.broken == "no_secret_in_ack":
            ack = Acknowledgement(op_id=op_id, participant=ENGINE)
            self.raw_events.send_multipart(frame_message(Kind.ACK, ack))
            return
        self.link.acknowledge(op_id)

    def embed(self, request: Request, embed: EmbeddingRequest) -> None:
        self.link.send_batch(
            BatchEmbeddingOutput(
                rids=[request.rid],
                http_worker_ipcs=[request.reply_to],
                finished_reasons=[{"type": "stop", "matched": None}],
                prompt_tokens=[len(embed.input_ids)],
                embeddings=[[float(token) for token in embed.input_ids]],
            )
        )

    def reason(self, row: Running) -> dict[str, Any] | None:
        params = row.params
        limit = self.tokens
        if self.broken != "ignores_max_new_tokens":
            limit = min(limit, params.max_new_tokens)
        eos = self.vocab.eos_token_id
        return finish_reason(
            row.output_ids,
            max_new_tokens=max(1, limit),
            min_new_tokens=params.min_new_tokens,
            stop_token_ids=frozenset(params.stop_token_ids)
            if self.broken != "ignores_stop_ids"
            else frozenset(),
            end_token_ids=frozenset([eos])
            if eos is not None and self.broken != "ignores_eos"
            else frozenset(),
            ignore_eos=params.ignore_eos,
            stop=tuple(params.stop) if self.broken != "ignores_stop_strings" else (),
            decode=lambda ids: decode_ids(self.vocab, ids),
        )

    def step(self) -> None:
        """One decode step: one more token, echoed from the prompt, for every request."""
        if self.paused or self.frozen or not self.running:
            return
        self.steps += 1
        rows = list(self.running.values())
        for row in rows:
            count = len(row.output_ids)
            row.output_ids.append(row.prompt[count % len(row.prompt)] if row.prompt else 0)
        reasons = [self.reason(row) for row in rows]
        if self.broken == "one_row_per_message":
            for row, reason in zip(rows, reasons, strict=True):
                self.send([row], [reason])
        else:
            self.send(rows, reasons)
        for row, reason in zip(rows, reasons, strict=True):
            if reason is not None:
                del self.running[row.owner, row.rid]

    def finish(self, rows: list[Running], reason: dict[str, Any]) -> None:
        if rows:
            self.send(rows, [reason] * len(rows), new=False)

    def send(
        self, rows: list[Running], reasons: list[dict[str, Any] | None], new: bool = True
    ) -> None:
        def ids(row: Running) -> list[int]:
            if self.broken == "cumulative_output_ids":
                return list(row.output_ids)
            return row.output_ids[-1:] if new else []

        suffix = "-x" if self.broken == "wrong_owner" else ""
        extra = 1 if self.broken == "wrong_prompt_tokens" else 0
        batch = BatchTokenIDOutput(
            rids=[row.rid for row in rows],
            http_worker_ipcs=[row.owner + suffix for row in rows],
            finished_reasons=reasons,
            prompt_tokens=[len(row.prompt) + extra for row in rows],
            completion_tokens=None
            if self.broken == "no_completion_tokens"
            else [len(row.output_ids) for row in rows],
            output_ids=[ids(row) for row in rows],
            stop_holdback=[max(map(len, row.params.stop), default=1) - 1 for row in rows],
        )
        if self.broken == "undecodable_rows":
            self.raw_outputs.send_multipart([*frame_batch(batch), b"\xc1"])
            return
        self.link.send_batch(batch)

    def publish_load(self) -> None:
        if self.broken == "no_load":
            return
        snapshot = LoadSnapshot(running=len(self.running), max_running=MAX_RUNNING, step=self.steps)
        if self.broken == "same_started_ns":
            snapshot.engine_started_ns = FIXED_STARTED_NS
        if self.broken in ("no_engine_started_ns", "no_secret_in_load"):
            snapshot.taken_ns = time.time_ns()
            snapshot.secret = "" if self.broken == "no_secret_in_load" else self.key
            if self.broken == "no_secret_in_load":
                snapshot.engine_started_ns = STARTED_NS
            self.raw_events.send_multipart(frame_message(Kind.LOAD, snapshot))
            return
        self.link.publish_load(snapshot)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--break", dest="broken", choices=sorted(BREAKS), help="the duty to break")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per request at most")
    parser.add_argument("--load-interval-s", type=float, default=0.2, help="seconds")
    args = parser.parse_args()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    env = os.environ
    endpoints = EngineEndpoints(
        inbound=env["SWITCHBOARD_ENGINE_INBOUND"],
        events=env["SWITCHBOARD_ENGINE_EVENTS"],
        outputs=env["SWITCHBOARD_ENGINE_OUTPUTS"],
    )
    vocab = read_vocab_file(Path(env["SWITCHBOARD_VOCAB_FILE"]))
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    raw = (context.socket(zmq.PUSH), context.socket(zmq.PUSH))
    for sock, endpoint in zip(raw, (endpoints.events, endpoints.outputs), strict=True):
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(endpoint)
    try:
        with EngineLink(endpoints, key=env["SWITCHBOARD_STACK_KEY"]) as link:
            engine = BrokenEngine(link, raw, vocab, args)
            next_load = 0.0
            while not stop.is_set():
                busy = engine.running and not engine.paused
                for item in link.poll(timeout_ms=5 if busy else 10):
                    engine.handle(item)
                engine.check_rejected()
                engine.step()
                if time.monotonic() >= next_load:
                    engine.publish_load()
                    next_load = time.monotonic() + args.load_interval_s
    finally:
        for sock in raw:
            sock.close(linger=0)
        context.term()


if __name__ == "__main__":
    main()
