"""ChatTemplate (switchboard.text.chat_template) renders as transformers' apply_chat_template
does: its jinja2 options, variables, helpers and tojson filter, and its errors, each the
template's own message."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import pytest

from switchboard.text.chat_template import ChatTemplate, ChatTemplateError, TemplateBounds

USER = [{"role": "user", "content": "Hi"}]


def render(source: str, messages: list[dict[str, Any]] | None = None, **kwargs: Any) -> str:
    """``source`` compiled and rendered on ``messages`` (one user turn by default)."""
    tokens = {key: kwargs.pop(key) for key in ("bos_token", "eos_token") if key in kwargs}
    return ChatTemplate(source, **tokens).render(USER if messages is None else messages, **kwargs)


def refusal(source: str, messages: list[dict[str, Any]] | None = None, **kw: Any) -> str:
    """The message of the ChatTemplateError rendering ``source`` raises."""
    with pytest.raises(ChatTemplateError) as caught:
        render(source, messages, **kw)
    return str(caught.value)


class TestJinjaOptions:
    """trim_blocks, lstrip_blocks and loopcontrols, as transformers sets them."""

    def test_trim_and_lstrip_blocks(self) -> None:
        """A block tag's newline is dropped and the spaces before it on its line too."""
        source = (
            "{% for m in messages %}\n    {% if true %}\n[{{ m.content }}]\n"
            "    {% endif %}\n{% endfor %}"
        )
        assert render(source) == "[Hi]\n"

    def test_loop_controls(self) -> None:
        """{% break %} and {% continue %} work."""
        source = (
            "{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}"
            "{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"
        )
        assert render(source) == "02"

    def test_generation_block_renders_its_content(self) -> None:
        """transformers' {% generation %} marker renders what it holds."""
        assert render("a{% generation %}{{ messages[0].content }}{% endgeneration %}b") == "aHib"

    def test_sandboxed(self) -> None:
        """Private attributes are unreachable and the builtin containers immutable."""
        assert "unsafe" in refusal("{{ messages.__class__.__mro__ }}")
        assert "unsafe" in refusal("{% set x = [] %}{{ x.append(1) }}")


class TestVariables:
    """What a template sees."""

    def test_messages_and_generation_prompt(self) -> None:
        """messages as given; add_generation_prompt true by default, false when asked."""
        source = "{{ messages | length }}{{ messages[0]['role'] }}{{ add_generation_prompt }}"
        assert render(source) == "1userTrue"
        assert render(source, add_generation_prompt=False) == "1userFalse"

    def test_tools_and_documents_are_none_when_not_given(self) -> None:
        """As transformers passes them: defined, and None."""
        source = "{{ tools is defined }}{{ tools is none }}{{ documents is none }}"
        assert render(source) == "TrueTrueTrue"
        tools = [{"type": "function", "function": {"name": "f"}}]
        assert render("{{ tools[0].function.name }}", tools=tools) == "f"

    def test_special_tokens(self) -> None:
        """bos_token and eos_token are the tokenizer's; a missing one is undefined."""
        source = "{{ bos_token }}|{{ eos_token }}|{{ bos_token is defined }}"
        assert render(source, bos_token="<s>", eos_token="</s>") == "<s>|</s>|True"
        assert render(source, eos_token="</s>") == "|</s>|False"

    def test_extra_variables(self) -> None:
        """extra adds variables and may set the special tokens and documents, but never
        messages, tools or add_generation_prompt."""
        extra = {
            "enable_thinking": False,
            "bos_token": "<B>",
            "documents": ["d"],
            "messages": [],
            "tools": ["t"],
            "add_generation_prompt": False,
        }
        source = (
            "{{ enable_thinking }} {{ bos_token }} {{ documents }} {{ messages | length }} "
            "{{ tools }} {{ add_generation_prompt }}"
        )
        assert render(source, bos_token="<s>", extra=extra) == "False <B> ['d'] 1 None True"

    def test_strftime_now(self) -> None:
        """strftime_now formats the clock's time."""
        template = ChatTemplate(
            "{{ strftime_now('%d %b %Y') }}", clock=lambda: datetime(2024, 7, 26, 12, 0)
        )
        assert template.render(USER) == "26 Jul 2024"


class TestToJson:
    """tojson is transformers': json.dumps, no HTML escaping, keys in order, non-ASCII kept."""

    def test_defaults(self) -> None:
        """Keys keep their order, non-ASCII stays, <>&' are not escaped."""
        value = {"z": "é<&>'", "a": [1, None, True]}
        assert render("{{ v | tojson }}", extra={"v": value}) == (
            '{"z": "é<&>\'", "a": [1, null, true]}'
        )

    def test_arguments(self) -> None:
        """indent, separators, sort_keys and ensure_ascii are json.dumps'."""
        value = {"b": 1, "a": "é"}
        assert render("{{ v | tojson(indent=2) }}", extra={"v": value}) == (
            '{\n  "b": 1,\n  "a": "é"\n}'
        )
        assert render("{{ v | tojson(separators=(',', ':')) }}", extra={"v": value}) == (
            '{"b":1,"a":"é"}'
        )
        assert render("{{ v | tojson(sort_keys=true) }}", extra={"v": value}) == (
            '{"a": "é", "b": 1}'
        )
        assert render("{{ v | tojson(ensure_ascii=true) }}", extra={"v": value}) == (
            '{"b": 1, "a": "\\u00e9"}'
        )


class TestErrors:
    """Every failure is a ChatTemplateError whose message is the template's own."""

    def test_raise_exception(self) -> None:
        """raise_exception's text is the message."""
        source = (
            "{% if messages[0].role != 'system' %}{{ raise_exception('System first!') }}{% endif %}"
        )
        assert refusal(source) == "System first!"

    def test_undefined_and_type_errors(self) -> None:
        """jinja2's and Python's messages pass through."""
        assert refusal("{{ messages[0].content + 1 }}") == (
            'can only concatenate str (not "int") to str'
        )
        assert "has no attribute 'nope'" in refusal("{{ messages[0].nope.deeper }}")
        assert refusal("{{ 1 / 0 }}") == "division by zero"

    def test_syntax_error_names_the_line(self) -> None:
        """A template that does not compile says why and where."""
        with pytest.raises(ChatTemplateError) as caught:
            ChatTemplate("ok\n{% for m in messages %}\n{{ m }")
        assert caught.value.bound is None
        assert str(caught.value).endswith("(line 3)")

    def test_not_a_bound(self) -> None:
        """A template's own refusal names no bound."""
        with pytest.raises(ChatTemplateError) as caught:
            ChatTemplate("{{ raise_exception('no') }}").render(USER)
        assert caught.value.bound is None


class TestConcurrency:
    """Renders in several threads at once keep their own budgets."""

    def test_threads_render_independently(self) -> None:
        """One thread's render crossing a bound does not stop another's."""
        template = ChatTemplate(
            "{% for i in range(n) %}x{% endfor %}", bounds=TemplateBounds(max_iterations=500)
        )
        results: dict[int, str] = {}

        def run(count: int) -> None:
            try:
                results[count] = template.render(USER, extra={"n": count})
            except ChatTemplateError as error:
                results[count] = error.bound or ""

        threads = [threading.Thread(target=run, args=(count,)) for count in (400, 900, 300)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        assert results == {400: "x" * 400, 900: "max_iterations", 300: "x" * 300}
