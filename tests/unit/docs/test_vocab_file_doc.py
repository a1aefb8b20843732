"""docs/protocol.md, section 3.10: the vocabulary file as documented is the one written."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from switchboard.text import Tokenizer
from switchboard.text.vocab_file import FORMAT, VocabFile, decode_ids, vocab_file

PROTOCOL = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def _section() -> str:
    text = PROTOCOL.read_text(encoding="utf-8")
    start = text.index("\n### 3.10 ")
    return text[start : text.index("\n---\n", start)]


def test_the_table_is_the_files_map() -> None:
    """One row per key of the map, in the file's order, and the format's name."""
    keys = re.findall(r"^\| `([a-z_]+)` \|", _section(), re.MULTILINE)
    assert keys == [field.name for field in msgspec.structs.fields(VocabFile)]
    assert f'`"{FORMAT}"`' in _section()


def test_the_built_in_vocabulary_by_the_documented_rule(default_tokenizer: Tokenizer) -> None:
    """Written as a plain map; the text of ids is their bytes joined, special ids left
    out, as the tokenizer decodes them."""
    vocab = vocab_file(default_tokenizer)
    plain = msgspec.msgpack.decode(msgspec.msgpack.encode(vocab))
    assert list(plain) == [field.name for field in msgspec.structs.fields(VocabFile)]
    assert vocab.eos_token_id in vocab.eog_token_ids
    ids = [461, 1278, vocab.eos_token_id or 0, 307]
    joined = b"".join(vocab.tokens[i] for i in ids if i not in vocab.special_token_ids)
    assert decode_ids(vocab, ids) == joined.decode() == default_tokenizer.decode(ids)
