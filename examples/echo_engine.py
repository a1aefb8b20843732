"""An echo engine: a complete Switchboard engine in one file, built on the engine link.

It answers every GENERATE one token per step, echoing the prompt's token ids (at most
``--tokens`` of them, and at most ``max_new_tokens``), in BatchTokenIDOutput batches,
stopping early on a stop id, the vocabulary's end ids or a stop string;
answers every EMBED at once; applies and acknowledges every pause and continue; answers
every operator's command (ENGINE_COMMAND: ``flush_cache``, refused while requests run
unpaused; any other name ``unknown_command``); and publishes its load every
``--load-interval-s`` seconds. SIGTERM or SIGINT stops it.

It presents the stack key, as every engine must to a router that has one: the link puts
it in every acknowledgement, command reply and load snapshot. The key is ``<run
dir>/stack.key`` (or ``--key-file``), which ``switchboard up`` writes at start.

    python examples/echo_engine.py --run-dir /tmp/sb

Without ``--run-dir`` it takes its endpoints and key from the variables ``switchboard up
--engine-command`` sets (``SWITCHBOARD_ENGINE_INBOUND``, ``_EVENTS``, ``_OUTPUTS``,
``SWITCHBOARD_STACK_KEY``):

    switchboard up --engine-command "python examples/echo_engine.py"
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
from typing import Any

from router_core import Command, EngineEndpoints, EngineInput, EngineLink, Request
from router_core.control.command_args import FlushCacheArgs
from router_core.control.replies import FlushCacheReply
from router_core.credentials import resolve_key
from router_core.wire.control import ContinueRequest, FreezeGC, LoadSnapshot, PauseRequest
from router_core.wire.engine_commands import EngineCommand
from router_core.wire.outputs import BatchEmbeddingOutput, BatchTokenIDOutput
from router_core.wire.requests import (
    AbortRequest,
    EmbeddingRequest,
    GenerateRequest,
    SamplingParams,
)
from switchboard.engine.stopping import finish_reason
from switchboard.text.vocab_file import VocabFile, decode_ids, read_vocab_file

MAX_RUNNING = 256


@dataclass
class Running:
    """A generation in progress: who asked, its prompt, and the tokens sent so far."""

    rid: str
    owner: str
    prompt: list[int]
    limit: int
    params: SamplingParams
    output_ids: list[int] = field(default_factory=list)


class EchoEngine:
    """The scheduler: what to do with each input, and one decode step at a time.

    ``vocab`` is the workers' vocabulary (``SWITCHBOARD_VOCAB_FILE``): the end ids to stop
    on, and the bytes of each id, to find stop strings in the text of the output. Without
    one it stops on ``stop_token_ids`` and length only.
    """

    def __init__(self, link: EngineLink, tokens: int, vocab: VocabFile | None = None) -> None:
        self.link = link
        self.tokens = tokens
        self.vocab = vocab
        self.end_ids = frozenset(vocab.eog_token_ids if vocab else ())
        self.running: dict[tuple[str, str], Running] = {}  # by (owner, rid)
        self.paused = False
        self.steps = 0

    def handle(self, item: EngineInput) -> None:
        match item:
            case Request(payload=GenerateRequest() as generate):
                limit = max(1, min(self.tokens, generate.sampling_params.max_new_tokens))
                running = Running(
                    item.rid, item.reply_to, generate.input_ids, limit, generate.sampling_params
                )
                self.running[item.reply_to, item.rid] = running
            case Request(payload=EmbeddingRequest() as embed):
                self.embed(item, embed)
            case Request(payload=AbortRequest() as abort):
                keys = [(item.reply_to, item.rid)]
                if abort.abort_all:
                    keys = [key for key in self.running if key[0] == item.reply_to]
                aborted = [self.running.pop(key) for key in keys if key in self.running]
                self.finish(aborted, {"type": "abort", "message": abort.reason})
            case Command(payload=PauseRequest() as pause):
                if pause.mode == "abort":
                    self.finish(list(self.running.values()), {"type": "abort", "message": "paused"})
                    self.running.clear()
                # "retract" and "in_place" both keep every request: there is no cache to free.
                self.paused = True
                self.link.acknowledge(pause.op_id)
            case Command(payload=ContinueRequest() as resume):
                self.paused = False
                self.link.acknowledge(resume.op_id)
            case Command(payload=FreezeGC() as freeze):
                gc.freeze()
                self.link.forward_freeze_gc(freeze)
            case Command(payload=EngineCommand() as command):
                self.carry_out(command, item)

    def carry_out(self, command: EngineCommand, item: Command) -> None:
        """Answer an operator's command exactly once (docs/protocol.md 3.11). There is no
        cache to drop, so ``flush_cache`` is done at once, but refused while requests run
        unpaused, as every engine's is; a name or arguments the link could not read into
        a known command's struct are answered with the link's reason."""
        if isinstance(item.args, FlushCacheArgs):
            if self.running and not self.paused:
                rids = [rid for _, rid in self.running]
                more = f" and {len(rids) - 8} more" if len(rids) > 8 else ""
                message = (
                    f"{len(rids)} requests are running ({', '.join(rids[:8])}{more}); pause "
                    "generation or let them finish first"
                )
                self.link.answer_command(command.op_id, code="conflict", message=message)
            else:
                self.link.answer_command(command.op_id, FlushCacheReply(dropped_tokens=0))
            return
        # item.problem is "<code>: <why>"; a known command this engine does not carry out
        # (args set, no problem) is unknown to it too.
        code, _, why = item.problem.partition(": ")
        self.link.answer_command(
            command.op_id,
            code="bad_arguments" if code == "bad_arguments" else "unknown_command",
            message=why or f"the echo engine does not carry out {command.command!r}",
        )

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

    def step(self) -> None:
        """One decode step: one more token, echoed from the prompt, for every request."""
        if self.paused or not self.running:
            return
        self.steps += 1
        rows = list(self.running.values())
        for row in rows:
            count = len(row.output_ids)
            row.output_ids.append(row.prompt[count % len(row.prompt)] if row.prompt else 0)
        reasons = [self.stop_reason(row) for row in rows]
        self.send(rows, reasons)
        for row, reason in zip(rows, reasons, strict=True):
            if reason is not None:
                del self.running[row.owner, row.rid]

    def stop_reason(self, row: Running) -> dict[str, Any] | None:
        """Why ``row`` ends with its newest token, by the rules every engine applies
        (docs/protocol.md, "Stop rules"): length, a stop id or an end id, a stop string."""
        params = row.params
        vocab = self.vocab

        def decode(ids: list[int]) -> str:
            assert vocab is not None
            return decode_ids(vocab, ids)  # special tokens left out, as the built-in engine

        return finish_reason(
            row.output_ids,
            max_new_tokens=row.limit,
            min_new_tokens=params.min_new_tokens,
            stop_token_ids=frozenset(params.stop_token_ids),
            end_token_ids=self.end_ids,
            ignore_eos=params.ignore_eos,
            stop=tuple(text for text in params.stop if text),
            decode=decode if vocab is not None else None,
        )

    def finish(self, rows: list[Running], reason: dict[str, Any]) -> None:
        if rows:
            self.send(rows, [reason] * len(rows), new=False)

    def send(
        self, rows: list[Running], reasons: list[dict[str, Any] | None], new: bool = True
    ) -> None:
        self.link.send_batch(
            BatchTokenIDOutput(
                rids=[row.rid for row in rows],
                http_worker_ipcs=[row.owner for row in rows],
                finished_reasons=reasons,
                prompt_tokens=[len(row.prompt) for row in rows],
                completion_tokens=[len(row.output_ids) for row in rows],
                # Only the ids new in this row: this step's one, or none (an abort).
                output_ids=[row.output_ids[-1:] if new else [] for row in rows],
                # The prompt's last ids, then the output: the detokenizer reads them from
                # a request's first row and decodes the output as the text that continues
                # them (a SentencePiece word's leading space kept). Later rows' are unread.
                decode_ids=[row.prompt[-5:] + row.output_ids for row in rows],
                read_offsets=[len(row.prompt[-5:]) for row in rows],
                # The request's own detokenization flags (absent: true, true, false).
                skip_special_tokens=[row.params.skip_special_tokens for row in rows],
                spaces_between_special_tokens=[
                    row.params.spaces_between_special_tokens for row in rows
                ],
                no_stop_trim=[row.params.no_stop_trim for row in rows],
                # Characters the detokenizer holds back for a stop string still to come:
                # the longest one's length minus one, 0 without any (absent: 32, and a
                # short answer would arrive only with its last row).
                stop_holdback=[max(map(len, row.params.stop), default=1) - 1 for row in rows],
            )
        )

    def publish_load(self) -> None:
        self.link.publish_load(
            LoadSnapshot(
                running=len(self.running),
                max_running=MAX_RUNNING,
                token_usage=len(self.running) / MAX_RUNNING,
                step=self.steps,
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument(
        "--run-dir", help="the stack's run directory (default: the SWITCHBOARD_* variables)"
    )
    parser.add_argument("--key-file", help="the stack key (default: stack.key in --run-dir)")
    # "detokenizers" is the old spelling of "direct" (EngineEndpoints takes both).
    parser.add_argument(
        "--outputs-via", choices=("direct", "router", "detokenizers"), default="direct"
    )
    parser.add_argument("--tokens", type=int, default=4, help="tokens per request at most")
    parser.add_argument(
        "--vocab",
        help="the workers' vocabulary file (default: SWITCHBOARD_VOCAB_FILE, else "
        "vocab.msgpack in --run-dir if there; switchboard vocab --out FILE writes one)",
    )
    parser.add_argument(
        "--load-interval-s", "--load-interval", type=float, default=0.5, help="seconds"
    )
    args = parser.parse_args()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())

    if args.run_dir is not None:
        endpoints = EngineEndpoints.in_run_dir(args.run_dir, outputs_via=args.outputs_via)
        key = resolve_key(args.key_file, args.run_dir)
    else:
        try:
            endpoints = EngineEndpoints(
                inbound=os.environ["SWITCHBOARD_ENGINE_INBOUND"],
                events=os.environ["SWITCHBOARD_ENGINE_EVENTS"],
                outputs=os.environ["SWITCHBOARD_ENGINE_OUTPUTS"],
            )
        except KeyError as missing:
            parser.error(f"no --run-dir, and {missing.args[0]} is not set")
        key = os.environ.get("SWITCHBOARD_STACK_KEY") or resolve_key(args.key_file, None)
    vocab_path = args.vocab or os.environ.get("SWITCHBOARD_VOCAB_FILE")
    if vocab_path is None and args.run_dir is not None:
        candidate = Path(args.run_dir) / "vocab.msgpack"
        vocab_path = str(candidate) if candidate.exists() else None
    vocab = read_vocab_file(Path(vocab_path)) if vocab_path else None
    with EngineLink(endpoints, key=key) as link:
        engine = EchoEngine(link, args.tokens, vocab)
        next_load = 0.0
        while not stop.is_set():
            busy = engine.running and not engine.paused
            for item in link.poll(timeout_ms=5 if busy else 100):
                engine.handle(item)
            engine.step()
            if time.monotonic() >= next_load:
                engine.publish_load()
                next_load = time.monotonic() + args.load_interval_s


if __name__ == "__main__":
    main()
