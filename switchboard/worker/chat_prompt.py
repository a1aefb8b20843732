"""A chat request's prompt: its messages rendered by the chat template, then token ids.

Pure logic over a template and a tokenizer, no I/O.

**Rendering** gives the template what Hugging Face templates expect: ``messages`` (each
``role`` and ``content`` as a string, plus ``name``, ``tool_calls``, ``tool_call_id``
and ``reasoning_content`` when given; the ``developer`` role is rendered as ``system``,
which is what templates know), ``tools``, ``add_generation_prompt``, and the request's
``chat_template_kwargs``. With ``continue_final_message`` the last (assistant) message
is left open: the rendering is cut right after its content.

**Tokenizing** encodes the rendering as Hugging Face does (special-token text parsed, no
BOS added: templates write their own), with one difference that keeps clients from
forging control tokens: a message whose content holds the text of a special token
(``<|im_end|>``) has that content encoded as plain characters. Its span is found in the
rendering in message order; when the template changed the content so that it cannot be
found, the request is refused rather than its markup parsed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from switchboard.text import TextCodec
from switchboard.worker.chat_schemas import ChatBody
from switchboard.worker.generation import PromptError

__all__ = ["ChatEncoder", "Renderer", "render_chat", "template_messages"]


class Renderer(Protocol):
    """What rendering needs of a chat template."""

    def render(
        self,
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """The prompt text; raises an error whose message is the template's own."""
        ...


def template_messages(body: ChatBody) -> list[dict[str, Any]]:
    """The messages as the template gets them (see the module docstring)."""
    shown: list[dict[str, Any]] = []
    for message in body.messages:
        entry: dict[str, Any] = {
            "role": "system" if message.role == "developer" else message.role,
            "content": message.text(),
        }
        for key in ("name", "tool_calls", "tool_call_id", "reasoning_content"):
            value = getattr(message, key)
            if value is not None:
                entry[key] = value
        shown.append(entry)
    return shown


def render_chat(template: Renderer, body: ChatBody) -> str:
    """The prompt text of ``body``; :class:`PromptError` with the template's message when
    it refuses the conversation, or when the final message cannot be continued."""
    messages = template_messages(body)
    continuing = body.continue_final_message
    try:
        rendered = template.render(
            messages,
            add_generation_prompt=body.add_generation_prompt and not continuing,
            tools=body.tools,
            extra=body.chat_template_kwargs,
        )
    except Exception as error:  # the template's own refusal, or a bound it crossed
        raise PromptError(f"the chat template refused the messages: {error}") from error
    if not continuing:
        return rendered
    final = (messages[-1]["content"] or "").strip()
    end = rendered.rfind(final) if final else -1
    if end < 0:
        raise PromptError(
            "continue_final_message: the chat template's rendering does not hold the final "
            "message's content, so it cannot be continued"
        )
    return rendered[: end + len(final)]


class ChatEncoder:
    """Token ids of rendered chat prompts for one tokenizer (see the module docstring)."""

    def __init__(self, tokenizer: TextCodec) -> None:
        self.tokenizer = tokenizer
        specials = sorted(tokenizer.special_tokens, key=len, reverse=True)
        self._special = re.compile("|".join(map(re.escape, specials))) if specials else None

    def holds_special(self, text: str) -> bool:
        """Whether ``text`` holds the text of a special token."""
        return self._special is not None and self._special.search(text) is not None

    def encode(self, rendered: str, contents: Sequence[str | None]) -> list[int]:
        """The ids of ``rendered``, the messages' ``contents`` (in order) kept literal
        where they hold special-token text; :class:`PromptError` when such a content
        cannot be found in the rendering."""
        spans = self._literal_spans(rendered, contents)
        encode = self.tokenizer.encode
        if not spans:
            return encode(rendered, add_special_tokens=False, parse_special=True)
        ids: list[int] = []
        at = 0
        for start, end in spans:
            ids += encode(rendered[at:start], add_special_tokens=False, parse_special=True)
            ids += encode(rendered[start:end], add_special_tokens=False, parse_special=False)
            at = end
        ids += encode(rendered[at:], add_special_tokens=False, parse_special=True)
        return ids

    def _literal_spans(
        self, rendered: str, contents: Sequence[str | None]
    ) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        at = 0
        for index, content in enumerate(contents):
            if not content:
                continue
            found, shown = -1, content
            for form in (content, content.strip()):
                found = rendered.find(form, at) if form else -1
                if found >= 0:
                    shown = form
                    break
            special = self.holds_special(shown)
            if found < 0:
                if special:
                    raise PromptError(
                        f"messages.{index}.content holds special-token text, and the chat "
                        "template changed the content, so it cannot be kept literal"
                    )
                continue
            if special:
                spans.append((found, found + len(shown)))
            at = found + len(shown)
        return spans
