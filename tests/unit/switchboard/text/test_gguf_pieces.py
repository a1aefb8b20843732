"""A GGUF model's output as llama.cpp's server shows it: the text after a prompt, and
each token's own piece (leading spaces kept), against llama.cpp's ``llama_token_to_piece``
on vocabularies of the llama-cpp-python sdist."""

from __future__ import annotations

import pytest

from switchboard.text import IncrementalDetokenizer
from tests.support import llama_vocab
from tests.unit.switchboard.text.test_gguf_tokenizer import Vocab, each_vocab, vocab

pytestmark = pytest.mark.integration

__all__ = ["vocab"]  # the fixture, imported so that it applies here


class TestServerPieces:
    @each_vocab(["llama-spm", "llama-bpe", "qwen2", "gpt-2"])
    def test_output_after_a_prompt_is_llama_cpp_servers_pieces(self, vocab: Vocab) -> None:
        """Given the prompt's last ids as context, the output's text is what llama.cpp's
        server streams (each id's piece, leading spaces kept); decoded without context a
        SentencePiece vocabulary loses the first piece's leading space."""
        tokenizer = vocab.tokenizer
        ids = tokenizer.encode("The capital of France is Paris and its river is the Seine")
        for split in range(2, len(ids)):
            prompt, output = ids[:split], ids[split:]
            detokenizer = IncrementalDetokenizer(tokenizer, context_ids=prompt[-5:])
            text = "".join(detokenizer.feed([token_id]).text for token_id in output)
            text += detokenizer.finish().text
            assert text == llama_vocab.llama_pieces(tokenizer, output), (split, text)
            assert detokenizer.token_ids == output
        if vocab.name == "llama-spm":
            paris = tokenizer.encode(" Paris", add_special_tokens=False)[-1:]
            alone = IncrementalDetokenizer(tokenizer)
            assert alone.feed(paris).text + alone.finish().text == "Paris"

    @each_vocab(["llama-spm", "llama-bpe", "qwen2"])
    def test_token_piece_is_llama_cpp_servers(self, vocab: Vocab) -> None:
        """A logprob's token text is the id's own piece: leading space kept, special
        tokens shown, nothing for an id outside the vocabulary."""
        tokenizer = vocab.tokenizer
        for token_id in tokenizer.encode("The capital of France is Paris, its river the Seine"):
            assert tokenizer.token_piece(token_id) == llama_vocab.llama_pieces(
                tokenizer, [token_id], special=True
            )
        if vocab.name == "llama-spm":
            (paris,) = tokenizer.encode(" Paris", add_special_tokens=False)[-1:]
            assert tokenizer.token_piece(paris) == " Paris"
            assert tokenizer.token_piece(1) == "<s>"
        assert tokenizer.token_piece(tokenizer.vocab_size) == ""

    @each_vocab(["llama-bpe"])
    def test_a_context_cut_inside_a_character_is_not_used(self, vocab: Vocab) -> None:
        """A context ending in half a UTF-8 character cannot be subtracted: it is dropped."""
        tokenizer = vocab.tokenizer
        ids = tokenizer.encode("🦩", add_special_tokens=False)
        assert len(ids) > 1, "the flamingo is one token in this vocabulary"
        detokenizer = IncrementalDetokenizer(tokenizer, context_ids=ids[:1])
        assert detokenizer.context_ids == []
        assert detokenizer.feed(ids[1:]).text + detokenizer.finish().text == tokenizer.decode(
            ids[1:]
        )
