"""A generated model's chat template (``switchboard.models.chat_templates``): kept when
the vocabulary brings one, else chosen by its special tokens, and written into the file."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
from gguf import GGUFReader, GGUFValueType
from jinja2.sandbox import ImmutableSandboxedEnvironment

from switchboard.models.builder import write_model
from switchboard.models.chat_templates import (
    CHAT_TEMPLATE_KEY,
    CHATML_TEMPLATE,
    INST_TEMPLATE,
    with_chat_template,
)
from switchboard.models.spec import TINY
from switchboard.models.vocab import TOKEN_LIST_KEY, MetadataEntry, Vocabulary
from tests.unit.switchboard.models.small import small_vocabulary


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


def render(template: str, messages: list[dict[str, str]], **extra: object) -> str:
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = _raise
    compiled = environment.from_string(template)
    return compiled.render(messages=messages, bos_token="<s>", eos_token="</s>", **extra)


def _vocab_with(*tokens: str) -> Vocabulary:
    entry = MetadataEntry(
        TOKEN_LIST_KEY, [t.encode() for t in tokens], GGUFValueType.ARRAY, GGUFValueType.STRING
    )
    return Vocabulary(entries=(entry,))


class TestChoice:
    def test_chatml_for_the_builtin_tokens(self) -> None:
        chosen = with_chat_template(_vocab_with("a", "<|im_start|>", "<|im_end|>"))
        template = chosen.find(CHAT_TEMPLATE_KEY)
        assert template is not None and template.value == CHATML_TEMPLATE

    def test_inst_otherwise(self) -> None:
        template = with_chat_template(small_vocabulary()).find(CHAT_TEMPLATE_KEY)
        assert template is not None and template.value == INST_TEMPLATE

    def test_a_vocabularys_own_template_is_kept(self) -> None:
        own = MetadataEntry(CHAT_TEMPLATE_KEY, "{{ messages }}", GGUFValueType.STRING)
        vocab = Vocabulary(entries=(*small_vocabulary().entries, own))
        assert with_chat_template(vocab) is vocab


class TestRenderings:
    def test_chatml(self) -> None:
        messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        assert render(CHATML_TEMPLATE, messages, add_generation_prompt=True) == (
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
            "<|im_start|>assistant\n"
        )

    def test_inst_with_a_system_message_and_turns(self) -> None:
        messages = [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U1"},
            {"role": "assistant", "content": "A1"},
            {"role": "user", "content": "U2"},
        ]
        assert render(INST_TEMPLATE, messages) == (
            "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1</s><s>[INST] U2 [/INST]"
        )

    def test_inst_refuses_a_tool_turn(self) -> None:
        with pytest.raises(jinja2.TemplateError, match="only user and assistant"):
            render(INST_TEMPLATE, [{"role": "tool", "content": "x"}])


def test_the_file_carries_it(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    write_model(TINY, small_vocabulary(), path)
    field = GGUFReader(path).fields[CHAT_TEMPLATE_KEY]
    assert field.contents() == INST_TEMPLATE
