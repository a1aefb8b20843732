"""Where a chat template comes from (switchboard.text.chat_template_source): the override
file, a GGUF model's metadata, the files beside a tokenizer.json, the built-in default,
or none; the special tokens it sees; and each refusal naming its file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from switchboard.text import GgufTokenizer, TextCodec, Tokenizer, load_tokenizer
from switchboard.text.chat_template_source import (
    DEFAULT_CHAT_TEMPLATE,
    ChatTemplateLoadError,
    load_chat_template,
)
from tests.support import llama_vocab

SYSTEM_USER = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
#: A template showing where it came from and the tokens it was given.
SHOW = "{{ where }}|{{ bos_token }}|{{ eos_token }}"


@pytest.fixture(scope="module")
def builtin() -> Tokenizer:
    """The built-in tokenizer."""
    return load_tokenizer()


@pytest.fixture
def model_dir(tmp_path: Path, builtin: Tokenizer) -> Path:
    """A model directory holding a tokenizer.json (the built-in one's) and nothing else."""
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "tokenizer.json").write_text(builtin.backend.to_str(), encoding="utf-8")
    return directory


def write_config(directory: Path, **config: Any) -> None:
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


def shown(template: Any) -> str:
    assert template is not None
    rendered: str = template.render([])
    return rendered


def load_error(*args: Any) -> ChatTemplateLoadError:
    with pytest.raises(ChatTemplateLoadError) as caught:
        load_chat_template(*args)
    return caught.value


class TestBuiltinDefault:
    """The built-in tokenizer gets DEFAULT_CHAT_TEMPLATE, ChatML with its own tokens."""

    def test_renders_chatml(self, builtin: Tokenizer) -> None:
        """System and user turns, then the assistant's opened; EOS <|endoftext|>, no BOS."""
        template = load_chat_template(builtin, None)
        assert template is not None and template.origin == "built-in default"
        assert (template.bos_token, template.eos_token) == (None, "<|endoftext|>")
        assert template.render(SYSTEM_USER) == (
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
            "<|im_start|>assistant\n"
        )

    def test_uses_the_tokenizers_special_tokens(self, builtin: Tokenizer) -> None:
        """Every special token the default template writes is one of the tokenizer's."""
        for token in ("<|im_start|>", "<|im_end|>"):
            assert token in DEFAULT_CHAT_TEMPLATE and token in builtin.special_tokens

    def test_tools_and_tool_calls(self, builtin: Tokenizer) -> None:
        """Tools in a system turn first, one JSON line each; tool calls after the content."""
        template = load_chat_template(builtin, None)
        assert template is not None
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": None, "tool_calls": [call, call]},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
        ]
        tools = [{"type": "function", "function": {"name": "f"}}]
        assert template.render(messages, tools=tools, add_generation_prompt=False) == (
            '<|im_start|>system\n# Tools\n{"type": "function", "function": {"name": "f"}}\n'
            "<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
            '<tool_call>{"name": "f", "arguments": "{}"}</tool_call>\n'
            '<tool_call>{"name": "f", "arguments": "{}"}</tool_call><|im_end|>\n'
            "<|im_start|>tool\n42<|im_end|>\n"
        )


class TestBesideTheTokenizer:
    """chat_template.jinja, else tokenizer_config.json's chat_template, beside a tokenizer.json."""

    def test_config_string(self, model_dir: Path) -> None:
        """The config's string, with its BOS and its EOS (which the tokenizer takes too)."""
        write_config(
            model_dir,
            chat_template="{% set where = 'config' %}" + SHOW,
            bos_token={"content": "<|pad|>"},
            eos_token="<|im_end|>",
        )
        tokenizer = load_tokenizer(model_dir)
        template = load_chat_template(tokenizer, model_dir)
        assert template is not None
        assert template.origin == str(model_dir / "tokenizer_config.json")
        assert shown(template) == "config|<|pad|>|<|im_end|>"

    def test_named_templates(self, model_dir: Path) -> None:
        """A list of named templates: the one named default."""
        write_config(
            model_dir,
            chat_template=[
                {"name": "tool_use", "template": "tools"},
                {"name": "default", "template": "default"},
            ],
        )
        assert shown(load_chat_template(load_tokenizer(model_dir), model_dir)) == "default"

    def test_named_templates_without_default(self, model_dir: Path) -> None:
        """Named templates none of which is the default: no template."""
        write_config(model_dir, chat_template=[{"name": "rag", "template": "x"}])
        assert load_chat_template(load_tokenizer(model_dir), model_dir) is None

    def test_jinja_file_first(self, model_dir: Path) -> None:
        """chat_template.jinja wins over the config's; a tokenizer.json path finds it too."""
        write_config(model_dir, chat_template="config")
        (model_dir / "chat_template.jinja").write_text("jinja file", encoding="utf-8")
        tokenizer = load_tokenizer(model_dir)
        for path in (model_dir, model_dir / "tokenizer.json"):
            template = load_chat_template(tokenizer, path)
            assert template is not None and shown(template) == "jinja file"
            assert template.origin == str(model_dir / "chat_template.jinja")

    def test_none(self, model_dir: Path) -> None:
        """A tokenizer with no template beside it has none (the built-in default is only
        the built-in tokenizer's)."""
        write_config(model_dir, eos_token="<|im_end|>")
        assert load_chat_template(load_tokenizer(model_dir), model_dir) is None
        (model_dir / "tokenizer_config.json").unlink()
        assert load_chat_template(load_tokenizer(model_dir), model_dir) is None

    def test_refusals(self, model_dir: Path) -> None:
        """A config that is not JSON, a chat_template of another type, a template that
        does not compile: each names the file."""
        tokenizer = load_tokenizer(model_dir)
        config = model_dir / "tokenizer_config.json"
        config.write_text("{not json", encoding="utf-8")
        error = load_error(tokenizer, model_dir)
        assert error.source == str(config) and error.reason.startswith("not valid JSON")
        write_config(model_dir, chat_template=42)
        assert "neither a string nor a list" in str(load_error(tokenizer, model_dir))
        write_config(model_dir, chat_template="{% if %}")
        error = load_error(tokenizer, model_dir)
        assert str(error).startswith(f"chat template {config}: does not compile: ")
        assert str(error).endswith("(line 1)")


class TestOverride:
    """--chat-template FILE comes first; a file that cannot be used is refused, named."""

    def test_wins_over_everything(self, builtin: Tokenizer, model_dir: Path) -> None:
        """Over the built-in default and over the files beside a tokenizer."""
        override = model_dir.parent / "mine.jinja"
        override.write_text("{% set where = 'override' %}" + SHOW, encoding="utf-8")
        write_config(model_dir, chat_template="config")
        assert shown(load_chat_template(builtin, None, override)) == "override||<|endoftext|>"
        template = load_chat_template(load_tokenizer(model_dir), model_dir, str(override))
        assert template is not None and template.origin == str(override)
        assert shown(template).startswith("override|")

    def test_empty_string_is_no_override(self, builtin: Tokenizer) -> None:
        """An empty setting means the model's template."""
        template = load_chat_template(builtin, None, "")
        assert template is not None and template.origin == "built-in default"

    @pytest.mark.parametrize(
        ("make", "reason"),
        [
            (lambda path: None, "not found (expected a Jinja template file)"),
            (lambda path: path.mkdir(), "not a regular file (expected a Jinja template file)"),
            (lambda path: path.write_bytes(b"\xff\xfe{{"), "not UTF-8 text: "),
            (lambda path: path.write_text(" \n"), "the file is empty"),
            (lambda path: path.write_text("{% for %}"), "does not compile: Expected an"),
        ],
        ids=["missing", "directory", "not-utf8", "empty", "bad-syntax"],
    )
    def test_refused(self, builtin: Tokenizer, tmp_path: Path, make: Any, reason: str) -> None:
        """Each unusable file, with the path as given and what is wrong."""
        path = tmp_path / "template.jinja"
        make(path)
        error = load_error(builtin, None, path)
        assert error.source == str(path)
        assert error.reason.startswith(reason)
        assert str(error) == f"chat template {path}: {error.reason}"


class FakeGguf:
    """What the loader reads of a GgufTokenizer: its metadata template and BOS/EOS."""

    def __init__(self, template: str | None) -> None:
        self.source = "/models/m.gguf"
        self.chat_template = template
        self.bos_token_id, self.eos_token_id = 1, 2

    def decode(self, ids: list[int], **_options: Any) -> str:
        return {1: "<s>", 2: "</s>"}[ids[0]]


class TestGgufMetadata:
    """A GGUF model's tokenizer.chat_template, with the vocabulary's BOS and EOS."""

    def test_metadata_template(self, tmp_path: Path) -> None:
        """The metadata is the template; the special tokens are the vocabulary's."""
        model = cast(TextCodec, FakeGguf("{% set where = 'gguf' %}" + SHOW))
        template = load_chat_template(model, tmp_path / "m.gguf")
        assert template is not None and shown(template) == "gguf|<s>|</s>"
        assert template.origin == "/models/m.gguf (its tokenizer.chat_template)"

    def test_no_metadata_is_no_template(self, tmp_path: Path) -> None:
        """Without the metadata there is none: files beside a GGUF are not the model's."""
        (tmp_path / "chat_template.jinja").write_text("beside", encoding="utf-8")
        model = cast(TextCodec, FakeGguf(None))
        assert load_chat_template(model, tmp_path / "m.gguf") is None

    def test_override_wins(self, tmp_path: Path) -> None:
        """--chat-template replaces the model's own."""
        override = tmp_path / "mine.jinja"
        override.write_text("mine", encoding="utf-8")
        model = cast(TextCodec, FakeGguf("theirs"))
        assert shown(load_chat_template(model, tmp_path / "m.gguf", override)) == "mine"


@pytest.fixture(scope="module")
def qwen2() -> Iterator[GgufTokenizer]:
    """llama.cpp's Qwen2 vocabulary file (from the llama-cpp-python sdist)."""
    tokenizer = load_tokenizer(llama_vocab.vocab_file("qwen2"))
    assert isinstance(tokenizer, GgufTokenizer)
    with tokenizer:
        yield tokenizer


@pytest.mark.integration
class TestRealGguf:
    """A real GGUF vocabulary, loaded by llama.cpp."""

    def test_qwen2_template_from_metadata(self, qwen2: GgufTokenizer) -> None:
        """Qwen2's template as its GGUF carries it: a default system turn, then ChatML."""
        template = load_chat_template(qwen2, qwen2.source)
        assert template is not None and template.eos_token == "<|endoftext|>"
        assert template.render([{"role": "user", "content": "Hi"}]) == (
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        )
