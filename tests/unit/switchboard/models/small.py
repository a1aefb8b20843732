"""A small made-up vocabulary and a vocabulary source counting its loads."""

from __future__ import annotations

from dataclasses import dataclass, field

from gguf import GGUFValueType

from switchboard.models.vocab import MetadataEntry, Vocabulary

__all__ = ["SMALL_VOCAB_SIZE", "CountingSource", "small_vocabulary"]

#: Tokens in :func:`small_vocabulary`: enough for distinct output rows, fast to write.
SMALL_VOCAB_SIZE = 300


def small_vocabulary(size: int = SMALL_VOCAB_SIZE) -> Vocabulary:
    """A llama-style (SentencePiece) vocabulary of ``size`` made-up tokens."""
    tokens = [b"<unk>", b"<s>", b"</s>", *(f"tok{index}".encode() for index in range(size - 3))]
    return Vocabulary(
        (
            MetadataEntry("tokenizer.ggml.model", "llama", GGUFValueType.STRING),
            MetadataEntry(
                "tokenizer.ggml.tokens", tokens, GGUFValueType.ARRAY, GGUFValueType.STRING
            ),
            MetadataEntry(
                "tokenizer.ggml.scores",
                [float(-index) for index in range(size)],
                GGUFValueType.ARRAY,
                GGUFValueType.FLOAT32,
            ),
            MetadataEntry(
                "tokenizer.ggml.token_type",
                [2, 3, 3, *([1] * (size - 3))],
                GGUFValueType.ARRAY,
                GGUFValueType.INT32,
            ),
            MetadataEntry("tokenizer.ggml.bos_token_id", 1, GGUFValueType.UINT32),
            MetadataEntry("tokenizer.ggml.eos_token_id", 2, GGUFValueType.UINT32),
            MetadataEntry("tokenizer.ggml.add_bos_token", True, GGUFValueType.BOOL),
        )
    )


@dataclass
class CountingSource:
    """A vocabulary source whose digest is given and whose loads are counted."""

    name: str = "small"
    content_digest: str = "0" * 64
    loads: int = 0
    vocabulary: Vocabulary = field(default_factory=small_vocabulary)

    def digest(self) -> str:
        return self.content_digest

    def load(self) -> Vocabulary:
        self.loads += 1
        return self.vocabulary
