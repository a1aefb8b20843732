"""The llama.cpp engine's scheduler: continuous batching over one unified KV cache.

It has the interface of the simulated :class:`~switchboard.engine.scheduler.Scheduler`
(both build on :class:`~switchboard.engine.queueing.QueueingScheduler`), so the engine
loop of :mod:`switchboard.engine.engine` drives either. Each :meth:`LlamaScheduler.step`:

1. admits waiting requests, in order, while a KV sequence id is free and the cache has
   room for the request's prefill beside every running request's next token
   (:func:`~.planner.fits`); a request that does not fit waits, and blocks those behind
   it, until finishing requests free cells;
2. plans one batch (:func:`~.planner.plan_step`): the next token of every decoding
   request plus prompt chunks of admitted ones, at most ``batch_size`` tokens;
3. runs it as one ``llama_decode``. If the cache has no room for it after all (decode
   status 1, the cache untouched), the most recently admitted request is preempted —
   its cells freed, it goes back to the front of the queue with its output kept, to be
   prefilled again — and the step is planned anew. A request alone in the cache that
   still does not fit ends with an abort row;
4. samples, for every request whose pending tokens were all fed, its next token with its
   own llama.cpp sampler chain (:mod:`~.sampling`), with its logprobs when asked, and
   ends it by the stop rules of :mod:`switchboard.engine.stopping` (the model's
   end-of-generation tokens count as EOS) or when it fills the context.

A finished, aborted, retracted or preempted request's KV cells are freed at once
(``llama_memory_seq_rm``). Pause modes keep their meaning: ``in_place`` keeps the cache
and resumes at the next step; ``retract`` frees every running request's cells and
re-prefills prompt plus output on continue; ``abort`` ends every request.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any

from router_core.wire.control import LoadSnapshot
from router_core.wire.finish import abort_reason, length_reason
from router_core.wire.requests import SamplingParams
from switchboard.engine.llama_cpp.config import LlamaConfig
from switchboard.engine.llama_cpp.model_file import ModelFileError
from switchboard.engine.llama_cpp.planner import Chunk, Slot, fits, plan_step
from switchboard.engine.llama_cpp.runtime import DECODE_NO_KV_SLOT, FeedToken, LlamaRuntime
from switchboard.engine.llama_cpp.sampling import SamplerChain, logprob
from switchboard.engine.queueing import QueueingScheduler
from switchboard.engine.sequences import FinishReason, Sequence, StepResult, StepRow
from switchboard.engine.stopping import finish_reason

__all__ = ["NO_EMBEDDINGS", "CacheInUse", "LlamaScheduler"]

#: The abort message of an embedding request: a generative model has no pooled output.
NO_EMBEDDINGS = "the llama-cpp engine serves generation only, not embeddings"
#: Seconds of steps that the load snapshot's ``tokens_per_s`` averages over.
RATE_WINDOW_S = 2.0


#: What this engine tells the workers it honours (``LoadSnapshot.features``).
FEATURES = ("logprobs", "logit_bias")


class CacheInUse(RuntimeError):
    """The KV cache holds the state of requests that are to go on."""


class LlamaScheduler(QueueingScheduler):
    """Waiting queue, KV sequences and pause state of the llama.cpp engine."""

    def __init__(self, runtime: LlamaRuntime, config: LlamaConfig) -> None:
        super().__init__(config.max_waiting_requests)
        self.runtime = runtime
        self.config = config
        self.slots: dict[tuple[str, str], Slot] = {}
        self._free_ids = list(range(config.sequences - 1, -1, -1))
        self._chains: dict[tuple[str, str], SamplerChain] = {}
        self._recent: deque[tuple[float, int]] = deque()
        self.preemptions = 0
        self.last_step_tokens = 0

    # ------------------------------------------------------------ the frame's hooks

    def running_sequences(self) -> list[Sequence]:
        return [slot.request for slot in self.slots.values()]

    def holds_running(self, key: tuple[str, str]) -> bool:
        return key in self.slots

    def release(self, sequence: Sequence) -> None:
        slot = self.slots.pop(sequence.key)
        self.runtime.free_sequence(slot.seq_id)
        self._free_ids.append(slot.seq_id)

    def refusal(self, sequence: Sequence) -> FinishReason | None:
        if sequence.embedding:
            return abort_reason(NO_EMBEDDINGS)
        cells = self.runtime.n_ctx
        if len(sequence.prompt) >= cells:
            return abort_reason(
                f"the prompt ({len(sequence.prompt)} tokens) does not fit the context "
                f"length of {cells} tokens"
            )
        params = sequence.sampling or SamplingParams()
        outside = [t for t in params.logit_bias if not 0 <= t < self.runtime.n_vocab]
        if outside:
            return abort_reason(
                f"logit_bias: token {outside[0]} is not in the model's vocabulary of "
                f"{self.runtime.n_vocab} tokens"
            )
        return None

    def admit(self, sequence: Sequence) -> StepResult:
        return self._forget_finished(super().admit(sequence))

    def abort(self, owner: str, rid: str, message: str = "client") -> StepResult:
        return self._forget_finished(super().abort(owner, rid, message))

    def abort_all(self, owner: str, message: str = "client") -> StepResult:
        return self._forget_finished(super().abort_all(owner, message))

    def pause(self, mode: Any) -> StepResult:
        return self._forget_finished(super().pause(mode))

    def _forget_finished(self, result: StepResult) -> StepResult:
        for row in result.rows:
            if row.finished is not None:
                chain = self._chains.pop(row.sequence.key, None)
                if chain is not None:
                    chain.free()
        return result

    # ------------------------------------------------------------------ stepping

    def next_step_at(self) -> float | None:
        """0.0 (now) while there is work and no pause; None otherwise."""
        if self.paused is not None or not (self.slots or self.waiting):
            return None
        return 0.0

    def step(self, now: float) -> StepResult:
        """Admit, decode one batch, sample; the rows of every request that moved."""
        if self.paused is not None or not (self.slots or self.waiting):
            return StepResult()
        self._admit_waiting()
        aborted: list[StepRow] = []
        while True:
            chunks = plan_step(list(self.slots.values()), self.config.batch_size)
            if not chunks:
                return self._forget_finished(StepResult(aborted))
            status = self.runtime.decode(_feed(chunks))
            if status != DECODE_NO_KV_SLOT:
                break
            aborted += self._make_room()
        self.steps += 1
        tokens = sum(len(chunk) for chunk in chunks)
        decode_tokens = sum(1 for chunk in chunks if chunk.start == chunk.slot.total - 1)
        rows = [*aborted, *self._advance(chunks)]
        self.last_step_tokens = tokens
        self._recent.append((time.monotonic(), tokens))
        result = StepResult(rows, self.steps, tokens - decode_tokens, decode_tokens)
        return self._forget_finished(result)

    def _admit_waiting(self) -> None:
        while self.waiting and self._free_ids:
            head = self.waiting[0]
            if not fits(self.slots.values(), head.prefill_tokens, self.runtime.n_ctx):
                return
            sequence = self.waiting.popleft()
            self.slots[sequence.key] = Slot(sequence, self._free_ids.pop())
            if sequence.key not in self._chains:
                params = sequence.sampling or SamplingParams()
                self._chains[sequence.key] = SamplerChain(params, self.runtime.n_vocab)

    def _make_room(self) -> list[StepRow]:
        """Preempt the newest request (back to the queue), or end a lone one."""
        newest = list(self.slots.values())[-1]
        if len(self.slots) > 1:
            self.preemptions += 1
            self.retract([newest.request])
            return []
        self.release(newest.request)
        message = f"the KV cache ({self.runtime.n_ctx} cells) cannot hold this request"
        return [StepRow(newest.request, [], abort_reason(message))]

    def _advance(self, chunks: list[Chunk]) -> list[StepRow]:
        rows: list[StepRow] = []
        index = -1
        for chunk in chunks:
            index += len(chunk)
            chunk.slot.fed = chunk.stop
            if chunk.samples:
                rows.append(self._sample(chunk.slot, index))
        return rows

    def _sample(self, slot: Slot, index: int) -> StepRow:
        request = slot.request
        asked = request.logprobs
        logits = self.runtime.logits(index).copy() if asked is not None else None
        token = self._chains[request.key].sample(self.runtime.context, index)
        request.output_ids.append(token)
        entry = None
        if logits is not None:
            chosen = logprob(logits, token, asked or 0)
            entry = [(chosen.logprob, chosen.top_ids, chosen.top_logprobs)]
        finished = finish_reason(
            request.output_ids,
            max_new_tokens=request.max_new_tokens,
            min_new_tokens=request.min_new_tokens,
            stop_token_ids=request.stop_token_ids,
            end_token_ids=self.runtime.end_token_ids,
            ignore_eos=request.ignore_eos,
            stop=request.stop,
            decode=self.runtime.detokenize,
        )
        if finished is None and slot.total >= self.runtime.n_ctx:
            finished = length_reason(len(request.output_ids))
        if finished is not None:
            self.release(request)
        return StepRow(request, [token], finished, logprobs=entry)

    # ------------------------------------------------------------------ load

    def load_weights(self, model: str, version: str) -> str:
        """Load the GGUF file ``model`` in place of the weights serving, as ``version``
        (default: the file's name). The old weights serve on, and ValueError names the
        file and the reason, when it cannot be opened, when its vocabulary is not the
        running tokenizer's (token for token), or while requests paused in place hold
        KV cells of the old weights (a new model has a new context: pause with retract
        to have them prefill again under the new weights)."""
        if not model:
            raise ValueError("give the GGUF file to load (model)")
        if self.slots:
            raise ValueError(
                f"{model}: {len(self.slots)} requests paused in place hold KV cells of the "
                "old weights; pause with retract or abort to update"
            )
        try:
            fresh = LlamaRuntime(model, self.runtime.config)
        except (OSError, ModelFileError) as exc:
            raise ValueError(f"{model}: {exc}") from exc
        try:
            differs = _vocabulary_difference(self.runtime, fresh)
        except BaseException:
            fresh.close()
            raise
        if differs:
            fresh.close()
            raise ValueError(
                f"{model}: its vocabulary differs from the running tokenizer's ({differs})"
            )
        old, self.runtime = self.runtime, fresh
        old.close()
        self.weight_version = version or Path(model).name
        return self.weight_version

    def flush_cache(self) -> int:
        """Clear the KV cache; the cells it held. Refused (:class:`CacheInUse`) while a
        request paused in place holds cells: clearing them would lose its state."""
        if self.slots:
            rids = ", ".join(rid for _, rid in list(self.slots)[:8])
            raise CacheInUse(
                f"{len(self.slots)} requests paused in place hold their KV cache ({rids}); "
                "continue and let them finish, or pause with retract or abort first"
            )
        held = self.kv_cells_used()
        self.runtime.clear_memory()
        return held

    def kv_cells_used(self) -> int:
        """KV cells the running requests hold."""
        return sum(slot.fed for slot in self.slots.values())

    def tokens_per_s(self, now: float) -> float:
        """Tokens fed per second over the last :data:`RATE_WINDOW_S`."""
        while self._recent and self._recent[0][0] < now - RATE_WINDOW_S:
            self._recent.popleft()
        return sum(tokens for _, tokens in self._recent) / RATE_WINDOW_S

    def load(self) -> LoadSnapshot:
        """Running and waiting requests, KV cells, throughput and the context length."""
        used, cells = self.kv_cells_used(), self.runtime.n_ctx
        return LoadSnapshot(
            running=len(self.slots),
            waiting=len(self.waiting),
            max_running=self.config.sequences,
            token_usage=min(1.0, used / cells),
            step=self.steps,
            kv_cells_used=used,
            kv_cells_total=cells,
            tokens_per_s=round(self.tokens_per_s(time.monotonic()), 1),
            context_length=cells,
            features=list(FEATURES),
        )

    def close(self) -> None:
        """Free every sampler chain (the runtime is its owner's to close)."""
        for chain in self._chains.values():
            chain.free()
        self._chains.clear()


def _vocabulary_difference(running: LlamaRuntime, fresh: LlamaRuntime) -> str:
    """How ``fresh``'s vocabulary differs from ``running``'s, or "" if it does not."""
    if fresh.n_vocab != running.n_vocab:
        return f"{fresh.n_vocab} tokens, not {running.n_vocab}"
    for token, (new, old) in enumerate(zip(fresh.vocabulary(), running.vocabulary(), strict=True)):
        if new != old:
            return f"token {token} is {new!r}, not {old!r}"
    return ""


def _feed(chunks: list[Chunk]) -> list[FeedToken]:
    feed: list[FeedToken] = []
    for chunk in chunks:
        slot = chunk.slot
        tokens = slot.tokens(chunk.start, chunk.stop)
        last = len(tokens) - 1
        for offset, token in enumerate(tokens):
            wants = chunk.samples and offset == last
            feed.append(FeedToken(token, chunk.start + offset, slot.seq_id, wants))
    return feed
