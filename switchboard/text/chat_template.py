"""Chat templates, rendered as Hugging Face ``transformers`` renders them.

:class:`ChatTemplate` compiles a model's Jinja chat template once and renders
conversations with it the way ``transformers``' ``apply_chat_template`` does:

- jinja2's immutable sandbox with ``trim_blocks`` and ``lstrip_blocks``, and the
  ``loopcontrols`` extension (``{% break %}``, ``{% continue %}``);
- the variables ``messages``, ``tools``, ``documents``, ``add_generation_prompt``, and
  ``bos_token`` and ``eos_token`` where the tokenizer has them (an absent one is
  undefined, as in transformers, whose map of special tokens leaves out a missing one);
- the helpers ``raise_exception(message)``, which refuses the conversation with that
  message, and ``strftime_now(format)``, the local time formatted;
- the ``tojson`` filter as transformers defines it: ``json.dumps`` with
  ``ensure_ascii=False`` and keys in their order by default, taking ``indent``,
  ``separators``, ``sort_keys`` and ``ensure_ascii``, and no HTML escaping;
- ``{% generation %}...{% endgeneration %}`` (transformers' marker of the assistant's
  tokens, for training masks) rendered as its content.

Each render is bounded (:class:`~switchboard.text.template_bounds.TemplateBounds`, by
:class:`~switchboard.text.template_sandbox.BoundedSandbox`). A template that fails to
compile, or that refuses, fails on or crosses a bound while rendering a conversation,
raises :class:`ChatTemplateError` whose message is the template's own: the text given to
``raise_exception``, jinja2's error, or the bound crossed. It is meant for the client
(HTTP 400); nothing else escapes :meth:`ChatTemplate.render`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import closing
from datetime import datetime
from typing import Any, NoReturn, cast

from jinja2 import TemplateError, TemplateSyntaxError, nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser

from switchboard.text.template_bounds import (
    BoundExceeded,
    TemplateBounds,
    current_budget,
    render_budget,
)
from switchboard.text.template_sandbox import BoundedSandbox

__all__ = ["ChatTemplate", "ChatTemplateError", "TemplateBounds"]


class ChatTemplateError(Exception):
    """A chat template that cannot be compiled, or that refused (or failed on) one
    conversation; the message is the template's own.

    ``bound`` is the :class:`TemplateBounds` field the render crossed, if that is why.
    """

    def __init__(self, message: str, *, bound: str | None = None) -> None:
        super().__init__(message)
        self.bound = bound


class GenerationBlock(Extension):
    """``{% generation %}...{% endgeneration %}``, rendered as its content.

    transformers marks the assistant's part of a rendering with it (to build training
    masks with ``return_assistant_tokens_mask``); for serving it marks nothing.
    """

    tags = {"generation"}  # noqa: RUF012 (jinja2 reads it off the class)

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def raise_exception(message: str) -> NoReturn:
    """The template's refusal of a conversation (its ``raise_exception(message)``)."""
    raise TemplateError(message)


def template_tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """transformers' ``tojson`` filter: ``json.dumps`` with these defaults (jinja2's own
    escapes HTML characters and sorts keys). Made piece by piece, so that a value whose
    JSON is too long is refused before it is all made."""
    encoder = json.JSONEncoder(
        ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )
    budget = current_budget()
    if budget is None:
        return encoder.encode(value)
    return budget.join(encoder.iterencode(value), "a string (the tojson filter)")


def _compile_error(error: Exception) -> ChatTemplateError:
    if isinstance(error, TemplateSyntaxError):
        return ChatTemplateError(f"{error.message} (line {error.lineno})")
    return ChatTemplateError(str(error) or type(error).__name__)


class ChatTemplate:
    """A compiled chat template (see the module docstring); safe to render from several
    threads at once.

    ``source`` is the template's text and ``origin`` says where it came from (a file,
    the model's metadata), for logs. ``bos_token`` and ``eos_token`` are the tokenizer's
    texts of those tokens, or None where it has none. ``clock`` gives ``strftime_now``
    its time. Raises :class:`ChatTemplateError` (with jinja2's message and the line) when
    ``source`` does not compile.
    """

    def __init__(
        self,
        source: str,
        *,
        origin: str = "chat template",
        bos_token: str | None = None,
        eos_token: str | None = None,
        bounds: TemplateBounds | None = None,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.source = source
        self.origin = origin
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.bounds = bounds or TemplateBounds()

        def strftime_now(format: str) -> str:
            return clock().strftime(format)

        environment = BoundedSandbox(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[loopcontrols, GenerationBlock],
            filters={"tojson": template_tojson},
            template_globals={"raise_exception": raise_exception, "strftime_now": strftime_now},
        )
        try:
            self._template = environment.from_string(source)
        # Any failure to compile (a syntax error, nesting too deep to parse) is the
        # template's: report it rather than a crash.
        except Exception as error:
            raise _compile_error(error) from error

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt text of ``messages`` (each a mapping with ``role`` and ``content``,
        as OpenAI's chat API has them, and any other keys the template reads).

        ``add_generation_prompt`` asks the template to open the assistant's turn;
        ``tools`` (OpenAI's tool definitions) and ``documents`` are None when not given.
        ``extra`` holds further variables (a request's ``chat_template_kwargs``, e.g.
        ``enable_thinking``); as in transformers they may set ``bos_token`` and
        ``eos_token`` and ``documents``, while ``messages``, ``tools`` and
        ``add_generation_prompt`` are always the arguments'. Raises
        :class:`ChatTemplateError` (see the module docstring).
        """
        variables: dict[str, Any] = {}
        if self.bos_token is not None:
            variables["bos_token"] = self.bos_token
        if self.eos_token is not None:
            variables["eos_token"] = self.eos_token
        variables.update(extra or {})
        variables.update(
            messages=list(messages),
            tools=tools,
            documents=variables.get("documents"),
            add_generation_prompt=add_generation_prompt,
        )
        with render_budget(self.bounds) as budget:
            try:
                parts: list[str] = []
                chunks = cast(Generator[str, None, None], self._template.generate(variables))
                with closing(chunks):
                    for chunk in chunks:
                        budget.add_output(len(chunk))
                        parts.append(chunk)
                return "".join(parts)
            except BoundExceeded as error:
                raise ChatTemplateError(str(error), bound=error.bound) from error
            except RecursionError as error:
                message = "the chat template recursed too deeply (max_call_depth)"
                raise ChatTemplateError(message, bound="max_call_depth") from error
            except TemplateError as error:
                raise ChatTemplateError(error.message or type(error).__name__) from error
            # The template's code failed on this conversation ('a' + none, 1 / 0, a
            # value too big for memory): its error, for the client.
            except Exception as error:
                raise ChatTemplateError(str(error) or type(error).__name__) from error

    def __repr__(self) -> str:
        return f"ChatTemplate(origin={self.origin!r})"
