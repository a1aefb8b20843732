"""What a generation answers: its text in chunks, the whole of it, an embedding, and
which weights made it, read from the output rows of one request. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from router_core.wire.outputs import WEIGHT_VERSION, BatchStrOutput
from router_core.worker_link import OutputRow, finish_reason_of
from switchboard.worker.logprobs import TokenLogprob, row_logprobs

__all__ = [
    "DEFAULT_WEIGHT_VERSION",
    "EmbeddingResult",
    "TextChunk",
    "TextResult",
    "chunk_of",
    "first",
    "weight_version_of",
]


@dataclass(slots=True)
class TextChunk:
    """New text of one request since the previous chunk, with its running counts."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    finish_reason: dict[str, Any] | None
    #: The new tokens' logprobs, when they were asked for.
    logprobs: list[TokenLogprob] = field(default_factory=list)
    #: The weights that made the chunk's last token (:data:`DEFAULT_WEIGHT_VERSION`:
    #: the engine's own, never updated).
    weight_version: str = "default"


@dataclass(slots=True)
class TextResult:
    """A finished generation."""

    rid: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    finish_reason: dict[str, Any] | None
    latency_s: float
    logprobs: list[TokenLogprob] = field(default_factory=list)
    #: The weights that made its last token.
    weight_version: str = "default"


@dataclass(slots=True)
class EmbeddingResult:
    """A finished embedding; ``embedding`` is empty when it was aborted."""

    rid: str
    embedding: list[float]
    prompt_tokens: int
    finish_reason: dict[str, Any] | None


def first(column: Sequence[Any] | None, default: Any) -> Any:
    if not column or column[0] is None:
        return default
    return column[0]


#: The weight version of tokens an engine's own weights made (SGLang's default name).
DEFAULT_WEIGHT_VERSION: Final = "default"


def weight_version_of(row: OutputRow) -> str:
    """The version of the weights that made ``row``'s tokens (the engine stamps it in
    ``customized_info``; none: the engine's own)."""
    extras = getattr(row, "customized_info", None) or {}
    stamped = first(extras.get(WEIGHT_VERSION), "")
    return stamped if isinstance(stamped, str) and stamped else DEFAULT_WEIGHT_VERSION


def chunk_of(rows: Sequence[OutputRow]) -> TextChunk:
    """One chunk of the text rows ``rows`` (consecutive rows of one request)."""
    text = "".join(first(row.output_strs, "") for row in rows if isinstance(row, BatchStrOutput))
    last = rows[-1]
    return TextChunk(
        text=text,
        prompt_tokens=first(last.prompt_tokens, 0),
        completion_tokens=first(getattr(last, "completion_tokens", None), 0),
        cached_tokens=first(last.cached_tokens, 0),
        finish_reason=finish_reason_of(last),
        logprobs=[item for row in rows for item in row_logprobs(row)],
        weight_version=weight_version_of(last),
    )
