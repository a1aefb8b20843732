"""``docs/http-api.md``'s field tables are what ``switchboard.worker.field_table``
renders from the request bodies: every named field, with its status and why."""

from __future__ import annotations

import pytest

from switchboard.worker import field_table
from switchboard.worker.chat_schemas import ChatBody
from switchboard.worker.schemas import GenerateBody, NativeSamplingParams


def test_the_doc_holds_the_generated_tables() -> None:
    """The doc equals its rewrite: run ``python -m switchboard.worker.field_table
    --write`` after changing a body."""
    doc = field_table.DOC.read_text(encoding="utf-8")
    assert field_table.rewrite(doc) == doc


@pytest.mark.parametrize(
    ("model", "prefix", "table"),
    [
        (GenerateBody, "", "generate"),
        (NativeSamplingParams, "sampling_params.", "generate"),
        (ChatBody, "", "chat"),
    ],
)
def test_every_field_has_a_row(model: type, prefix: str, table: str) -> None:
    """Each field of the body is a row of its table."""
    rendered = field_table.render(table)
    for name in model.model_fields:
        assert f"| `{prefix}{name}` |" in rendered


def test_statuses_are_read_off_the_fields() -> None:
    """A NotSupported mark, an "accepted and ignored" or "passed to the engine"
    description, or neither."""
    fields = GenerateBody.model_fields
    assert field_table.row_of(fields["lora_path"]) == ("not supported", "LoRA adapters")
    assert field_table.row_of(fields["priority"]) == ("ignored", "")
    assert field_table.row_of(fields["stream"]) == ("honoured", "")
    sampling = NativeSamplingParams.model_fields
    assert field_table.row_of(sampling["min_p"]) == ("to the engine", "")


def test_a_doc_without_the_markers_is_refused() -> None:
    """Rewriting a doc that lacks a table's markers fails, naming the table."""
    with pytest.raises(ValueError, match="generate table"):
        field_table.rewrite("no tables here")
