"""The built-in engine process: a :class:`~switchboard.engine.scheduler.Scheduler` on the link.

:class:`BuiltinEngine` uses only ``router_core.engine_link``. Its loop polls the link
until the next step is due (or for the load interval when idle or paused), applies each
input, runs a step when due and sends it as one ``BatchTokenIDOutput`` (and one
``BatchEmbeddingOutput`` for the embeddings answered in it), one row per request.
Aborts, abort-mode pauses and the abort rows of requests refused because the waiting
queue is full (counted in ``link.counters`` as ``rejected`` ``queue_full``) are sent at
once. Pause and continue are applied, then acknowledged; freeze-GC freezes this
process's collector and is forwarded; an operator's engine command (``flush_cache``) is
carried out and answered (:mod:`switchboard.engine.operator_commands`). Load is
published at start and every ``load_interval_s``. :meth:`BuiltinEngine.request_stop`
(signal-safe) ends :meth:`BuiltinEngine.run`, which closes the link.

Tracing: :meth:`BuiltinEngine.run` sets it up (``switchboard-engine``) and shuts it down
on the way out; the spans themselves (``engine request``, ``engine emit_batch``) come
from the engine link.

Rows follow SGLang's incremental shape: ``output_ids`` holds the step's new ids,
``decode_ids`` the last (up to 5) prompt ids plus every output id, and ``read_offsets``
where the output starts in ``decode_ids``; ``decoded_texts`` is empty.
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass

import msgspec

from router_core import tracing
from router_core.engine_link import Command, EngineInput, EngineLink, Request
from router_core.wire.control import ContinueRequest, FreezeGC, PauseRequest
from router_core.wire.engine_commands import EngineCommand
from router_core.wire.outputs import WEIGHT_VERSION, BatchEmbeddingOutput, BatchTokenIDOutput
from router_core.wire.requests import AbortRequest, EmbeddingRequest, GenerateRequest
from switchboard.counter_export import SYNC_INTERVAL_S, CounterExport
from switchboard.engine.operator_commands import carry_out
from switchboard.engine.queueing import QueueingScheduler
from switchboard.engine.sequences import Sequence, StepResult, StepRow
from switchboard.process_export import ProcessUsageExport

__all__ = [
    "DEFAULT_LOAD_INTERVAL_S",
    "INIT_DETOKENIZE_OFFSET",
    "BuiltinEngine",
    "OutputOptions",
    "token_batch",
]

log = logging.getLogger(__name__)

#: Prompt ids sent ahead of the output in ``decode_ids`` (SGLang's
#: ``INIT_INCREMENTAL_DETOKENIZATION_OFFSET``), context for the first output token.
INIT_DETOKENIZE_OFFSET = 5

#: Seconds between load snapshots (``switchboard engine --load-interval-s``).
DEFAULT_LOAD_INTERVAL_S = 0.1


@dataclass(frozen=True)
class OutputOptions:
    """A generation's detokenizer options, sent with each of its rows."""

    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False


def _sequence(request: Request, generate: GenerateRequest) -> Sequence:
    params = generate.sampling_params
    return Sequence(
        rid=request.rid,
        owner=request.reply_to,
        prompt=list(generate.input_ids),
        max_new_tokens=max(1, params.max_new_tokens),
        min_new_tokens=params.min_new_tokens,
        stop=tuple(text for text in params.stop if text),
        stop_token_ids=frozenset(params.stop_token_ids),
        ignore_eos=params.ignore_eos,
        sampling=params,
        logprobs=generate.top_logprobs_num if generate.return_logprob else None,
        context=OutputOptions(
            params.skip_special_tokens, params.spaces_between_special_tokens, params.no_stop_trim
        ),
    )


def token_batch(rows: list[StepRow]) -> BatchTokenIDOutput:
    """The ``BatchTokenIDOutput`` of generation rows (SGLang's incremental shape)."""
    options = [
        row.sequence.context if isinstance(row.sequence.context, OutputOptions) else OutputOptions()
        for row in rows
    ]
    heads = [row.sequence.prompt[-INIT_DETOKENIZE_OFFSET:] for row in rows]
    batch = BatchTokenIDOutput(
        rids=[row.sequence.rid for row in rows],
        http_worker_ipcs=[row.sequence.owner for row in rows],
        finished_reasons=[row.finished for row in rows],
        prompt_tokens=[len(row.sequence.prompt) for row in rows],
        cached_tokens=[0] * len(rows),
        completion_tokens=[len(row.sequence.output_ids) for row in rows],
        output_ids=[list(row.new_ids) for row in rows],
        decoded_texts=[""] * len(rows),
        decode_ids=[head + row.sequence.output_ids for head, row in zip(heads, rows, strict=True)],
        read_offsets=[len(head) for head in heads],
        retraction_counts=[row.sequence.retractions for row in rows],
        skip_special_tokens=[option.skip_special_tokens for option in options],
        spaces_between_special_tokens=[option.spaces_between_special_tokens for option in options],
        no_stop_trim=[option.no_stop_trim for option in options],
        stop_holdback=[max(map(len, row.sequence.stop), default=1) - 1 for row in rows],
    )
    if any(row.logprobs is not None for row in rows):
        _add_logprobs(batch, rows)
    return batch


def _add_logprobs(batch: BatchTokenIDOutput, rows: list[StepRow]) -> None:
    """SGLang's output logprob columns: each row's new ids' logprobs and top alternatives
    (empty lists for a row that asked for none)."""
    entries = [row.logprobs or [] for row in rows]
    batch.output_token_logprobs_val = [[value for value, _, _ in entry] for entry in entries]
    batch.output_token_logprobs_idx = [list(row.new_ids) for row in rows]
    if any(top for entry in entries for _, top, _ in entry):
        batch.output_top_logprobs_val = [[list(vals) for _, _, vals in entry] for entry in entries]
        batch.output_top_logprobs_idx = [[list(ids) for _, ids, _ in entry] for entry in entries]


def embedding_batch(rows: list[StepRow]) -> BatchEmbeddingOutput:
    """The ``BatchEmbeddingOutput`` of embedding rows (an aborted one has no values)."""
    return BatchEmbeddingOutput(
        rids=[row.sequence.rid for row in rows],
        http_worker_ipcs=[row.sequence.owner for row in rows],
        finished_reasons=[row.finished for row in rows],
        prompt_tokens=[len(row.sequence.prompt) for row in rows],
        cached_tokens=[0] * len(rows),
        embeddings=[row.embedding or [] for row in rows],
    )


def _queue_full(row: StepRow) -> bool:
    return (row.finished or {}).get("err_type") == "engine_queue_full"


class BuiltinEngine:
    """The simulated engine's loop around one open-on-run :class:`EngineLink`."""

    def __init__(
        self,
        link: EngineLink,
        scheduler: QueueingScheduler,
        *,
        load_interval_s: float = DEFAULT_LOAD_INTERVAL_S,
        name: str = "built-in engine",
    ) -> None:
        """``scheduler`` is any backend's (the simulated one, llama.cpp's); ``name`` is
        how the log lines call this engine."""
        self.link = link
        self.scheduler = scheduler
        self.load_interval_s = load_interval_s
        self.name = name
        self._stopping = False
        self._next_load = 0.0

    def request_stop(self) -> None:
        """Ask :meth:`run` to return after its current poll (safe in a signal handler)."""
        self._stopping = True

    def run(self) -> None:
        """Set up tracing, open the link, serve until :meth:`request_stop`, close the link."""
        tracing.setup("engine", "engine")
        try:
            self._serve()
        finally:
            tracing.shutdown()  # after the link closed, so its open request spans are in

    def _serve(self) -> None:
        export = CounterExport("engine")
        usage = ProcessUsageExport("engine", "engine")
        next_export = 0.0
        with self.link:
            log.info("%s up", self.name)
            while not self._stopping:
                for item in self.link.poll(timeout_ms=self._timeout_ms(time.monotonic())):
                    self.handle(item)
                now = time.monotonic()
                due = self.scheduler.next_step_at()
                if due is not None and now >= due:
                    self.send(self.scheduler.step(now))
                if now >= self._next_load:
                    load = self.scheduler.load()
                    version = self.scheduler.weight_version
                    self.link.publish_load(msgspec.structs.replace(load, weight_version=version))
                    self._next_load = now + self.load_interval_s
                if now >= next_export:
                    export.sync(self.link.counters)
                    usage.sync()
                    next_export = now + SYNC_INTERVAL_S
        export.sync(self.link.counters)  # what closing the link counted, too
        log.info("%s stopped after %d steps", self.name, self.scheduler.steps)

    def _timeout_ms(self, now: float) -> int:
        deadline = self._next_load
        due = self.scheduler.next_step_at()
        if due is not None:
            deadline = min(deadline, due)
        return max(0, min(100, int((deadline - now) * 1000) + 1))

    def handle(self, item: EngineInput) -> None:
        """Apply one request or command; send what it finishes at once."""
        match item:
            case Request(payload=GenerateRequest() as generate):
                self._admit(_sequence(item, generate))
            case Request(payload=EmbeddingRequest() as embed):
                prompt = list(embed.input_ids)
                self._admit(Sequence(item.rid, item.reply_to, prompt, embedding=True))
            case Request(payload=AbortRequest() as abort):
                if abort.abort_all:
                    self.send(self.scheduler.abort_all(item.reply_to, abort.reason))
                else:
                    self.send(self.scheduler.abort(item.reply_to, item.rid, abort.reason))
            case Command(payload=PauseRequest() as pause):
                self.send(self.scheduler.pause(pause.mode))
                self.link.acknowledge(pause.op_id)
                self._next_load = 0.0  # publish the paused load now
            case Command(payload=ContinueRequest() as resume):
                self.scheduler.resume()
                self.link.acknowledge(resume.op_id)
                self._next_load = 0.0
            case Command(payload=FreezeGC() as freeze):
                gc.freeze()
                self.link.forward_freeze_gc(freeze)
            case Command(payload=EngineCommand()):
                carry_out(self.link, self.scheduler, item)
                self._next_load = 0.0  # what the command changed shows at once

    def _admit(self, sequence: Sequence) -> None:
        refused = self.scheduler.admit(sequence)
        if refused.rows:
            if any(_queue_full(row) for row in refused.rows):
                self.link.counters.add("rejected", "queue_full")
            self.send(refused)

    def send(self, result: StepResult) -> None:
        """Send a step's rows: generations as one token batch, embeddings as one batch."""
        tokens = [row for row in result.rows if not row.sequence.embedding]
        embeddings = [row for row in result.rows if row.sequence.embedding]
        if tokens:
            batch = token_batch(tokens)
            if self.scheduler.weight_version:  # which weights made these tokens
                version = [self.scheduler.weight_version] * len(tokens)
                batch.customized_info = {**(batch.customized_info or {}), WEIGHT_VERSION: version}
            self.link.send_batch(batch)
        if embeddings:
            self.link.send_batch(embedding_batch(embeddings))
