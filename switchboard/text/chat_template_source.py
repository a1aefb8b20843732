"""Where a worker's chat template comes from: :func:`load_chat_template`.

The template is the first of:

1. the ``--chat-template FILE`` override (a Jinja file), when given;
2. a GGUF model's own ``tokenizer.chat_template`` metadata (what llama.cpp's
   ``llama_model_chat_template`` reads);
3. for a ``tokenizer.json`` (or a model directory holding one), ``chat_template.jinja``
   beside it, else the ``chat_template`` of ``tokenizer_config.json`` beside it: a
   string, or a list of ``{"name": ..., "template": ...}`` of which the one named
   ``default`` is used (as transformers does);
4. for the built-in tokenizer, :data:`DEFAULT_CHAT_TEMPLATE`.

Otherwise the model has no template and :func:`load_chat_template` returns None: the
chat endpoint then refuses every request, saying so. The ``bos_token`` and
``eos_token`` a template sees are the texts of the tokenizer's BOS and EOS tokens, else
the ``bos_token`` and ``eos_token`` of the ``tokenizer_config.json`` beside it; where
neither names one, the variable is undefined (as in transformers).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

from switchboard.text.chat_template import ChatTemplate, ChatTemplateError, TemplateBounds
from switchboard.text.codec import TextCodec
from switchboard.text.gguf_file import is_gguf_file

__all__ = ["DEFAULT_CHAT_TEMPLATE", "ChatTemplateLoadError", "load_chat_template"]

#: The built-in tokenizer's chat template: ChatML, with its ``<|im_start|>`` and
#: ``<|im_end|>`` special tokens (the same turns as the generated models' template,
#: :mod:`switchboard.models.chat_templates`). Tools, when given, are listed one JSON
#: object a line in a system turn of their own first; an assistant's tool calls follow
#: its content, each ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` on a line.
DEFAULT_CHAT_TEMPLATE: Final = """\
{%- if tools %}
    {{- '<|im_start|>system\\n# Tools\\n' }}
    {%- for tool in tools %}
        {{- tool | tojson }}
        {{- '\\n' }}
    {%- endfor %}
    {{- '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {{- '<|im_start|>' + message.role + '\\n' }}
    {%- if message.content %}
        {{- message.content }}
    {%- endif %}
    {%- for call in message.tool_calls or [] %}
        {%- if message.content or not loop.first %}
            {{- '\\n' }}
        {%- endif %}
        {{- '<tool_call>' + call.function | tojson + '</tool_call>' }}
    {%- endfor %}
    {{- '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

#: Where a template file sits beside a tokenizer.json (transformers writes it so).
TEMPLATE_FILE = "chat_template.jinja"
#: The file beside a tokenizer.json holding ``chat_template``, ``bos_token``, ``eos_token``.
CONFIG_FILE = "tokenizer_config.json"


class ChatTemplateLoadError(Exception):
    """A chat template could not be loaded: ``chat template <source>: <reason>``.

    ``source`` says where it was looked for (a file, a model's metadata), ``reason``
    what is wrong, so that a caller naming its own setting (``--chat-template PATH``)
    can add the reason.
    """

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"chat template {source}: {reason}")
        self.source = source
        self.reason = reason


def _read_text(path: Path, source: str) -> str:
    """The UTF-8 text of ``path``; :class:`ChatTemplateLoadError` naming ``source``."""
    if not path.exists():
        raise ChatTemplateLoadError(source, "not found (expected a Jinja template file)")
    if not path.is_file():
        raise ChatTemplateLoadError(source, "not a regular file (expected a Jinja template file)")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ChatTemplateLoadError(source, f"not UTF-8 text: {error}") from error
    except OSError as error:
        raise ChatTemplateLoadError(source, f"cannot be read: {error.strerror or error}") from error


def _read_config(directory: Path) -> dict[str, Any]:
    """The ``tokenizer_config.json`` in ``directory``, or {} when there is none."""
    path = directory / CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        config = json.loads(_read_text(path, str(path)))
    except ValueError as error:
        raise ChatTemplateLoadError(str(path), f"not valid JSON: {error}") from error
    if not isinstance(config, dict):
        raise ChatTemplateLoadError(str(path), "not a JSON object")
    return config


def _config_template(config: dict[str, Any], source: str) -> str | None:
    """``config``'s ``chat_template``: the string, or the list's ``default`` one."""
    template = config.get("chat_template")
    if template is None or isinstance(template, str):
        return template
    if isinstance(template, list) and all(
        isinstance(item, dict) and isinstance(item.get("template"), str) for item in template
    ):
        named = {item.get("name"): item["template"] for item in template}
        found = named.get("default")
        return found if isinstance(found, str) else None
    raise ChatTemplateLoadError(
        source, 'chat_template is neither a string nor a list of {"name", "template"}'
    )


def _config_token(config: dict[str, Any], key: str) -> str | None:
    """A ``tokenizer_config.json`` token: a string, or an added token's ``content``."""
    token = config.get(key)
    if isinstance(token, dict):
        token = token.get("content")
    return token if isinstance(token, str) else None


def _token_text(tokenizer: TextCodec, token_id: Any) -> str | None:
    """The text of special token ``token_id``, or None for no id."""
    if not isinstance(token_id, int):
        return None
    return tokenizer.decode([token_id], skip_special_tokens=False) or None


def _compiled(
    source: str,
    text: str,
    tokenizer: TextCodec,
    config: dict[str, Any],
    bounds: TemplateBounds | None,
) -> ChatTemplate:
    bos = _token_text(tokenizer, getattr(tokenizer, "bos_token_id", None))
    eos = _token_text(tokenizer, tokenizer.eos_token_id)
    try:
        return ChatTemplate(
            text,
            origin=source,
            bos_token=bos or _config_token(config, "bos_token"),
            eos_token=eos or _config_token(config, "eos_token"),
            bounds=bounds,
        )
    except ChatTemplateError as error:
        raise ChatTemplateLoadError(source, f"does not compile: {error}") from error


def _tokenizer_directory(tokenizer_path: str | os.PathLike[str]) -> Path | None:
    """The directory of a ``tokenizer.json`` path (a file or a model directory); None for
    a GGUF model, whose template is its own metadata."""
    path = Path(tokenizer_path)
    if path.is_dir():
        return path
    if path.suffix.lower() == ".gguf" or not path.is_file() or is_gguf_file(path):
        return None
    return path.parent


def load_chat_template(
    tokenizer: TextCodec,
    tokenizer_path: str | os.PathLike[str] | None,
    override: str | os.PathLike[str] | None = None,
    *,
    bounds: TemplateBounds | None = None,
) -> ChatTemplate | None:
    """The chat template for ``tokenizer``, loaded from ``tokenizer_path`` (None: the
    built-in tokenizer), or from the ``override`` file when one is given (an empty
    string is none); see the module docstring for the order. None when the model has
    no template. ``bounds`` bound every render (:class:`TemplateBounds` by default).

    Raises :class:`ChatTemplateLoadError` naming the file (or the model's metadata) when
    the override is missing, not a file, unreadable, not UTF-8 or empty, or when the
    template found does not compile, or a ``tokenizer_config.json`` beside the
    tokenizer is not JSON or its ``chat_template`` neither a string nor a list of
    named templates.
    """
    directory = None if tokenizer_path is None else _tokenizer_directory(tokenizer_path)
    config = _read_config(directory) if directory is not None else {}
    if override:
        source = os.fspath(override)
        text = _read_text(Path(override), source)
        if not text.strip():
            raise ChatTemplateLoadError(source, "the file is empty")
        return _compiled(source, text, tokenizer, config, bounds)
    metadata = getattr(tokenizer, "chat_template", None)
    if isinstance(metadata, str):
        source = f"{tokenizer.source} (its tokenizer.chat_template)"
        return _compiled(source, metadata, tokenizer, config, bounds)
    if tokenizer_path is None:
        return _compiled("built-in default", DEFAULT_CHAT_TEMPLATE, tokenizer, config, bounds)
    if directory is None:
        return None
    beside = directory / TEMPLATE_FILE
    if beside.exists():
        return _compiled(str(beside), _read_text(beside, str(beside)), tokenizer, config, bounds)
    source = str(directory / CONFIG_FILE)
    configured = _config_template(config, source)
    return None if configured is None else _compiled(source, configured, tokenizer, config, bounds)
