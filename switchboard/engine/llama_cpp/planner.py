"""What one step feeds the model: pure, no llama.cpp, no clock.

A running request is a :class:`Slot`: its sequence, its KV sequence id and how many of
its tokens (prompt, then output) the KV cache holds (``fed``). Every token not yet fed
is *pending*: a decoding request has exactly one (its newest output token), a request
being prefilled has more. :func:`plan_step` spends a step's token budget first on one
token for every decoding request, then on prompt chunks of the requests being prefilled,
in the order they were admitted; a chunk that reaches the end of a request's pending
tokens asks for logits, so the request samples its next token in this step.
:func:`fits` says whether the KV cache can take one more request without preempting.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from switchboard.engine.sequences import Sequence as Request

__all__ = ["Chunk", "Slot", "fits", "plan_step"]


@dataclass
class Slot:
    """One running request and the part of it that is in the KV cache."""

    request: Request
    seq_id: int
    fed: int = 0

    @property
    def total(self) -> int:
        """Prompt plus output tokens."""
        return len(self.request.prompt) + len(self.request.output_ids)

    @property
    def pending(self) -> int:
        """Tokens not yet fed to the model."""
        return self.total - self.fed

    def tokens(self, start: int, stop: int) -> list[int]:
        """Tokens ``start .. stop-1`` of prompt-then-output."""
        prompt = self.request.prompt
        if stop <= len(prompt):
            return prompt[start:stop]
        output = self.request.output_ids
        return prompt[start:] + output[max(0, start - len(prompt)) : stop - len(prompt)]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Tokens ``start .. stop-1`` of ``slot`` fed at positions ``start .. stop-1``."""

    slot: Slot
    start: int
    stop: int

    @property
    def samples(self) -> bool:
        """Whether the chunk ends the slot's pending tokens (its last one gets logits)."""
        return self.stop == self.slot.total

    def __len__(self) -> int:
        return self.stop - self.start


def plan_step(slots: Sequence[Slot], budget: int) -> list[Chunk]:
    """The chunks of one step over ``slots`` (admission order), at most ``budget`` tokens."""
    chunks: list[Chunk] = []
    decoding = [slot for slot in slots if slot.pending == 1]
    for slot in decoding[:budget]:
        chunks.append(Chunk(slot, slot.fed, slot.total))
    left = budget - len(chunks)
    for slot in slots:
        if left <= 0:
            break
        if slot.pending > 1:
            size = min(slot.pending, left)
            chunks.append(Chunk(slot, slot.fed, slot.fed + size))
            left -= size
    return chunks


def fits(slots: Iterable[Slot], prefill_tokens: int, cells: int) -> bool:
    """Whether a request of ``prefill_tokens`` fits beside ``slots`` in ``cells`` KV cells,
    with room for every running request's next token."""
    held = [slot.total + 1 for slot in slots]
    return sum(held) + prefill_tokens + 1 <= cells
