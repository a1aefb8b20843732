"""docs/protocol.md, section 3.8: the columns an engine sends, held to the detokenizer.

The table names each of ``BatchTokenIDOutput``'s columns once, and what it says a
detokenizer does when a row leaves a column out, or when a stop token ends a request,
is what :class:`~switchboard.detokenizer.rows.RowDetokenizer` does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from router_core.wire.finish import length_reason, stop_reason
from router_core.wire.outputs import BatchEmbeddingOutput, BatchStrOutput, BatchTokenIDOutput
from switchboard.detokenizer.rows import RowDetokenizer
from switchboard.text import Tokenizer

PROTOCOL = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
OWNER = "ipc:///run/switchboard/worker-w0"
#: "The system is running and the request" in the built-in tokenizer.
PROMPT = [461, 1278, 307, 1255, 279, 265, 381]


def _section_3_8() -> str:
    text = PROTOCOL.read_text(encoding="utf-8")
    start = text.index("\n### 3.8 ")
    return text[start : text.index("\n### 3.9 ", start)]


def _table_names() -> list[str]:
    names = []
    for line in _section_3_8().splitlines():
        if line.startswith("| `"):
            first = line.split(" | ")[0]
            names += re.findall(r"`([a-z_]+)`", first)
    return names


def test_the_table_names_every_column_once() -> None:
    """Every column of BatchTokenIDOutput, and nothing else, once; the count is right."""
    fields = [field.name for field in msgspec.structs.fields(BatchTokenIDOutput)]
    names = _table_names()
    assert sorted(names) == sorted(fields)
    assert len(names) == len(set(names))
    assert f"Of the {len(fields)} columns of `BatchTokenIDOutput`" in _section_3_8()
    counts = " ".join(PROTOCOL.read_text(encoding="utf-8").split())
    assert f"`BatchTokenIDOutput` has {len(fields)} fields" in counts
    assert f"`BatchStrOutput` {len(msgspec.structs.fields(BatchStrOutput))}," in counts
    assert f"`BatchEmbeddingOutput` {len(msgspec.structs.fields(BatchEmbeddingOutput))}." in counts


def _row(rid: str, new: list[int], total: int, finished: Any = None, **columns: Any) -> Any:
    return BatchTokenIDOutput(
        rids=[rid],
        finished_reasons=[finished],
        output_ids=[new],
        completion_tokens=[total],
        **{name: [value] for name, value in columns.items()},
    )


def _text(detokenizer: RowDetokenizer, rows: list[Any]) -> list[str]:
    return [
        detokenizer.text_row(row, OWNER, now=0.0).output_strs[0]  # type: ignore[union-attr]
        for row in rows
    ]


def test_without_the_flags_a_row_reads_true_true_false(default_tokenizer: Tokenizer) -> None:
    """No skip_special_tokens, spaces_between_special_tokens, no_stop_trim: the text of
    rows with true, true, false; an EOS in the text is dropped as a special token."""
    eos = default_tokenizer.eos_token_id
    assert eos is not None
    bare = [_row("a", [461], 1, stop_holdback=0), _row("a", [eos, 1278], 3, length_reason(3))]
    flagged = [
        _row(
            "a",
            [461],
            1,
            stop_holdback=0,
            skip_special_tokens=True,
            spaces_between_special_tokens=True,
            no_stop_trim=False,
        ),
        _row("a", [eos, 1278], 3, length_reason(3), no_stop_trim=False),
    ]
    texts = _text(RowDetokenizer(default_tokenizer), bare)
    assert texts == _text(RowDetokenizer(default_tokenizer), flagged)
    assert "".join(texts) == "The system"


def test_without_stop_holdback_32_characters_wait(default_tokenizer: Tokenizer) -> None:
    """No stop_holdback: the detokenizer's 32 characters are held back, so a short text
    comes with the finishing row; with 0 it streams."""
    rows = [_row("a", [461], 1), _row("a", [1278], 2), _row("a", [307], 3, length_reason(3))]
    assert _text(RowDetokenizer(default_tokenizer), rows) == ["", "", "The system is"]
    held = [msgspec.structs.replace(row, stop_holdback=[0]) for row in rows]
    assert _text(RowDetokenizer(default_tokenizer), held) == ["The", " system", " is"]


def test_without_the_prompt_context_the_output_stands_alone(default_tokenizer: Tokenizer) -> None:
    """decode_ids and read_offsets of the first row are read only when the output part
    is that row's output_ids."""
    context = PROMPT[-5:]
    good = _row("a", [461], 1, length_reason(1), decode_ids=[*context, 461], read_offsets=5)
    ignored = _row("b", [461], 1, length_reason(1), decode_ids=[*context, 9], read_offsets=5)
    detokenizer = RowDetokenizer(default_tokenizer)
    assert _text(detokenizer, [good, ignored]) == ["The", "The"]


def test_a_stop_token_counts_and_is_dropped_from_the_text(default_tokenizer: Tokenizer) -> None:
    """The stop token is the last id of the finishing row and counts in completion_tokens;
    the text leaves it out, unless no_stop_trim; ids after it are ignored."""
    rows = [_row("a", [461], 1, stop_holdback=0), _row("a", [1278], 2, stop_reason(1278))]
    detokenizer = RowDetokenizer(default_tokenizer)
    out = [detokenizer.text_row(row, OWNER, now=0.0) for row in rows]
    assert [row.output_strs[0] for row in out if row is not None] == ["The", ""]
    assert out[-1] is not None and out[-1].completion_tokens == [2]
    kept = [rows[0], msgspec.structs.replace(rows[1], no_stop_trim=[True])]
    assert _text(RowDetokenizer(default_tokenizer), kept) == ["The", " system"]
    after = [rows[0], _row("a", [1278, 307], 3, stop_reason(1278))]
    assert _text(RowDetokenizer(default_tokenizer), after) == ["The", ""]
    earlier = [_row("a", [461, 1278], 2, stop_holdback=0), _row("a", [], 2, stop_reason(1278))]
    assert _text(RowDetokenizer(default_tokenizer), earlier) == ["The system", ""]
