"""Tests for the built-in engine's token pool (switchboard.engine.tokens): printable,
non-special ids only, which the default tokenizer decodes to text."""

from __future__ import annotations

import pytest

from switchboard.engine import generated_token, text_token_pool


class TestTokenPool:
    """text_token_pool, the ids generated_token draws from."""

    def test_pool_holds_printable_non_special_ids(self) -> None:
        """The pool skips special ids and ids that do not decode to printable text."""
        texts = {0: "<eos>", 1: "\x07", 2: "\ufffd", 3: "", 4: "hi", 5: " there"}
        pool = text_token_pool(6, lambda ids: texts[ids[0]], special_ids=[0])
        assert pool == (4, 5)
        with pytest.raises(ValueError):
            text_token_pool(4, lambda ids: texts[ids[0]], special_ids=[0])

    def test_default_tokenizer_decodes_generated_tokens_to_text(self) -> None:
        """With the default tokenizer the generated ids decode to printable text."""
        from switchboard.text import load_tokenizer

        tokenizer = load_tokenizer()
        pool = text_token_pool(tokenizer.vocab_size, tokenizer.decode, tokenizer.special_token_ids)
        ids = [generated_token(pool, [17, 42], i) for i in range(32)]
        text = tokenizer.decode(ids)
        assert text.strip() and "\ufffd" not in text and tokenizer.eos_token_id not in ids
