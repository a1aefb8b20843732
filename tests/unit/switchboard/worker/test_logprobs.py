"""Output logprobs (``switchboard.worker.logprobs``): read off output rows, shown in
SGLang's and OpenAI's shapes, over a fixed vocabulary."""

from __future__ import annotations

import math

from router_core.wire.outputs import BatchStrOutput
from switchboard.worker.logprobs import (
    TokenLogprob,
    chat_shape,
    completion_shape,
    row_logprobs,
    sglang_shape,
)

VOCAB = {7: "He", 8: "llo", 9: "!", 10: "é"}
TOKENS = [
    TokenLogprob(7, -0.5, ((7, -0.5), (9, -1.5))),
    TokenLogprob(8, -0.25, ((8, -0.25), (10, -2.0))),
]


def decode(token_id: int) -> str:
    return VOCAB[token_id]


class TestRows:
    def test_values_ids_and_alternatives(self) -> None:
        """A row's columns become one entry per new token, alternatives paired."""
        row = BatchStrOutput(
            rids=["r"],
            output_strs=["Hello"],
            output_token_logprobs_val=[[-0.5, -0.25]],
            output_token_logprobs_idx=[[7, 8]],
            output_top_logprobs_val=[[[-0.5, -1.5], [-0.25, -2.0]]],
            output_top_logprobs_idx=[[[7, 9], [8, 10]]],
        )
        assert row_logprobs(row) == TOKENS

    def test_a_row_without_them_has_none(self) -> None:
        """No logprob columns (not asked, or an engine without them): nothing."""
        assert row_logprobs(BatchStrOutput(rids=["r"], output_strs=["x"])) == []

    def test_without_alternatives(self) -> None:
        """Asked for no alternatives: each entry has none."""
        row = BatchStrOutput(
            rids=["r"], output_token_logprobs_val=[[-1.0]], output_token_logprobs_idx=[[9]]
        )
        assert row_logprobs(row) == [TokenLogprob(9, -1.0)]


class TestShapes:
    def test_sglang(self) -> None:
        """[logprob, id, text] entries; text only with return_text_in_logprobs."""
        shown = sglang_shape(TOKENS, decode, with_text=True, top=1)
        assert shown["output_token_logprobs"] == [[-0.5, 7, "He"], [-0.25, 8, "llo"]]
        assert shown["output_top_logprobs"] == [[[-0.5, 7, "He"]], [[-0.25, 8, "llo"]]]
        bare = sglang_shape(TOKENS, decode, with_text=False, top=0)
        assert bare == {"output_token_logprobs": [[-0.5, 7, None], [-0.25, 8, None]]}

    def test_completion(self) -> None:
        """Legacy completions: tokens, their logprobs, top maps, offsets from the echo."""
        shown = completion_shape(TOKENS, decode, top=2, offset=3)
        assert shown == {
            "tokens": ["He", "llo"],
            "token_logprobs": [-0.5, -0.25],
            "top_logprobs": [{"He": -0.5, "!": -1.5}, {"llo": -0.25, "é": -2.0}],
            "text_offset": [3, 5],
        }
        assert completion_shape(TOKENS, decode, top=0)["top_logprobs"] is None

    def test_chat(self) -> None:
        """Chat: one content entry per token with its UTF-8 bytes and alternatives."""
        shown = chat_shape(TOKENS, decode, top=2)
        assert shown["refusal"] is None
        first, second = shown["content"]
        assert first == {
            "token": "He",
            "logprob": -0.5,
            "bytes": [72, 101],
            "top_logprobs": [
                {"token": "He", "logprob": -0.5, "bytes": [72, 101]},
                {"token": "!", "logprob": -1.5, "bytes": [33]},
            ],
        }
        assert second["top_logprobs"][1]["bytes"] == list("é".encode())
        assert all(math.isfinite(entry["logprob"]) for entry in shown["content"])
