"""Published chat templates render as transformers renders them.

The templates in ``chat_templates/`` are the models' own, as published in their
``tokenizer_config.json`` (llama.cpp keeps copies under ``models/templates/``): Llama 3.2
Instruct, Qwen2.5 Instruct, Mistral 7B Instruct v0.3 (Mistral's "v3" template, which
llama.cpp's ``tests/test-chat-template.cpp`` also has as Mistral-Large-Instruct-2407's),
Gemma 2 it, Phi-3 mini instruct (its first template) and Phi-3.5 mini instruct.

The expected renderings are llama.cpp's (``test-chat-template.cpp``) for its six-message
conversation, where its Jinja output is the template's own; where llama.cpp folds a
system message into the first user turn for a template that refuses or drops one,
transformers does not, and the expectation is the template's (Gemma's refusal, Phi-3
mini dropping the system message). The others (tools, tool calls, the Qwen default
system message, generation prompt off) follow the published formats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from switchboard.text.chat_template import ChatTemplate, ChatTemplateError

TEMPLATES = Path(__file__).with_name("chat_templates")

#: test-chat-template.cpp's conversation.
CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant"},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi there"},
    {"role": "user", "content": "Who are you"},
    {"role": "assistant", "content": "   I am an assistant   "},
    {"role": "user", "content": "Another question"},
]
NO_SYSTEM = CONVERSATION[1:]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
WEATHER_CALL = {
    "id": "call12345",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
}
TOOL_TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
    {"role": "tool", "content": "22C", "tool_call_id": "call12345"},
]


def template(name: str, bos_token: str | None = None, eos_token: str | None = None) -> ChatTemplate:
    """The published template ``name`` with the model's special tokens."""
    source = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    return ChatTemplate(source, origin=name, bos_token=bos_token, eos_token=eos_token)


def refusal(chat: ChatTemplate, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    with pytest.raises(ChatTemplateError) as caught:
        chat.render(messages, **kwargs)
    assert caught.value.bound is None
    return str(caught.value)


LLAMA_HEADER = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
)


class TestLlama32:
    """Llama 3.2 Instruct: the dated system header, trimmed turns, tools in the first
    user message."""

    chat = template("llama-3.2-instruct", bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    date: ClassVar = {"date_string": "26 Jul 2024"}

    def test_conversation(self) -> None:
        """llama.cpp's Llama-3 rendering, after the 3.x system header."""
        assert self.chat.render(CONVERSATION, extra=self.date) == (
            LLAMA_HEADER + "You are a helpful assistant<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        )

    def test_no_system_message_and_no_generation_prompt(self) -> None:
        """The header is there with an empty system message; no assistant header."""
        rendered = self.chat.render(NO_SYSTEM[:1], add_generation_prompt=False, extra=self.date)
        assert rendered == (
            LLAMA_HEADER + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
        )

    def test_date_from_strftime_now(self) -> None:
        """Without date_string, the date is strftime_now's."""
        from datetime import datetime

        source = (TEMPLATES / "llama-3.2-instruct.jinja").read_text(encoding="utf-8")
        dated = ChatTemplate(
            source, bos_token="<|begin_of_text|>", clock=lambda: datetime(2025, 3, 9)
        )
        assert "Today Date: 09 Mar 2025\n\n" in dated.render(NO_SYSTEM[:1])

    def test_tools_and_tool_call(self) -> None:
        """Tools go into the first user message, indented JSON; a call is its JSON."""
        rendered = self.chat.render(TOOL_TURNS, tools=[WEATHER_TOOL], extra=self.date)
        assert rendered == (
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Environment: ipython\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n"
            "Given the following functions, please respond with a JSON for a function call "
            "with its proper arguments that best answers the given prompt.\n\n"
            'Respond in the format {"name": function name, "parameters": dictionary of '
            "argument name and its value}.Do not use variables.\n\n"
            '{\n    "type": "function",\n    "function": {\n        "name": "get_weather",\n'
            '        "description": "Get the weather",\n        "parameters": {\n'
            '            "type": "object",\n            "properties": {\n'
            '                "city": {\n                    "type": "string"\n'
            "                }\n            }\n        }\n    }\n}\n\n"
            "What's the weather in Paris?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
            '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>'
            # A string is iterable to Jinja, so the template writes the result as JSON.
            '<|start_header_id|>ipython<|end_header_id|>\n\n"22C"<|eot_id|>'
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        )

    def test_refusals(self) -> None:
        """Tools without a user message, and two tool calls at once, are refused."""
        assert refusal(self.chat, CONVERSATION[:1], tools=[WEATHER_TOOL]) == (
            "Cannot put tools in the first user message when there's no first user message!"
        )
        two_calls = [{"role": "assistant", "tool_calls": [WEATHER_CALL, WEATHER_CALL]}]
        assert refusal(self.chat, two_calls) == (
            "This model only supports single tool-calls at once!"
        )


QWEN_DEFAULT_SYSTEM = (
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
)


class TestQwen25:
    """Qwen2.5 Instruct: ChatML, a default system message, Hermes-style tool calls."""

    chat = template("qwen2.5-instruct", eos_token="<|im_end|>")

    def test_conversation(self) -> None:
        """llama.cpp's ChatML rendering (its OpenHermes case): untrimmed turns."""
        assert self.chat.render(CONVERSATION) == (
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n"
            "<|im_start|>user\nWho are you<|im_end|>\n"
            "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n"
            "<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n"
        )

    def test_default_system_message(self) -> None:
        """Without a system message, Qwen's own; the generation prompt only when asked."""
        question = [{"role": "user", "content": "Give me a short introduction to LLMs."}]
        turns = (
            QWEN_DEFAULT_SYSTEM + "<|im_end|>\n"
            "<|im_start|>user\nGive me a short introduction to LLMs.<|im_end|>\n"
        )
        assert self.chat.render(question) == turns + "<|im_start|>assistant\n"
        assert self.chat.render(question, add_generation_prompt=False) == turns

    def test_tools_and_tool_call(self) -> None:
        """Tools in the system message, the call in <tool_call>, the result as a user turn."""
        assert self.chat.render(TOOL_TURNS, tools=[WEATHER_TOOL]) == (
            QWEN_DEFAULT_SYSTEM + "\n\n# Tools\n\nYou may call one or more functions to "
            "assist with the user query.\n\nYou are provided with function signatures within "
            "<tools></tools> XML tags:\n<tools>\n"
            '{"type": "function", "function": {"name": "get_weather", "description": '
            '"Get the weather", "parameters": {"type": "object", "properties": {"city": '
            '{"type": "string"}}}}}\n</tools>\n\nFor each function call, return a json object '
            "with function name and arguments within <tool_call></tool_call> XML tags:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n"
            '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": '
            '{"city": "Paris"}}\n</tool_call><|im_end|>\n'
            "<|im_start|>user\n<tool_response>\n22C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n"
        )


class TestMistralV3:
    """Mistral 7B Instruct v0.3: [INST] turns, the system message before the last user
    message, alternation and tool call ids enforced."""

    chat = template("mistral-7b-instruct-v0.3", bos_token="<s>", eos_token="</s>")

    def test_conversation(self) -> None:
        """llama.cpp's Jinja rendering of its v3 case (with the BOS it leaves empty)."""
        expected = (
            "<s>[INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant"
            "</s>[INST] You are a helpful assistant\n\nAnother question[/INST]"
        )
        assert self.chat.render(CONVERSATION) == expected
        assert self.chat.render(CONVERSATION, add_generation_prompt=False) == expected

    def test_tools(self) -> None:
        """Tools are listed before the last user message."""
        messages = [{"role": "user", "content": "What's the weather in Paris?"}]
        assert self.chat.render(messages, tools=[WEATHER_TOOL]) == (
            '<s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", '
            '"description": "Get the weather", "parameters": {"type": "object", '
            '"properties": {"city": {"type": "string"}}}}}][/AVAILABLE_TOOLS]'
            "[INST] What's the weather in Paris?[/INST]"
        )

    def test_alternation_refused(self) -> None:
        """Two user turns in a row."""
        assert refusal(self.chat, [NO_SYSTEM[0], NO_SYSTEM[0]]) == (
            "After the optional system message, conversation roles must alternate "
            "user/assistant/user/assistant/..."
        )

    def test_tool_call_id_refused(self) -> None:
        """A tool call id that is not 9 characters."""
        call = {**WEATHER_CALL, "id": "call_1"}
        messages = [TOOL_TURNS[0], {"role": "assistant", "tool_calls": [call]}]
        assert refusal(self.chat, messages) == (
            "Tool call IDs should be alphanumeric strings with length 9!"
        )


GEMMA_TURNS = (
    "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
    "<start_of_turn>user\nWho are you<end_of_turn>\n"
    "<start_of_turn>model\nI am an assistant<end_of_turn>\n"
    "<start_of_turn>user\nAnother question<end_of_turn>\n"
)


class TestGemma2:
    """Gemma 2 it: user and model turns, trimmed; no system role."""

    chat = template("gemma-2-it", bos_token="<bos>", eos_token="<eos>")

    def test_conversation(self) -> None:
        """llama.cpp's Gemma rendering of the turns after the system message."""
        assert self.chat.render(NO_SYSTEM) == GEMMA_TURNS + "<start_of_turn>model\n"
        assert self.chat.render(NO_SYSTEM, add_generation_prompt=False) == GEMMA_TURNS

    def test_system_role_refused(self) -> None:
        """transformers renders the template, which refuses a system message."""
        assert refusal(self.chat, CONVERSATION) == "System role not supported"

    def test_alternation_refused(self) -> None:
        """A conversation starting with the assistant."""
        assert refusal(self.chat, NO_SYSTEM[1:]) == (
            "Conversation roles must alternate user/assistant/user/assistant/..."
        )


PHI3_TURNS = (
    "<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n"
    "<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n"
    "<|assistant|>\n"
)


class TestPhi3:
    """Phi-3 mini instruct (its first template) and Phi-3.5 mini instruct."""

    mini = template("phi-3-mini-instruct", bos_token="<s>", eos_token="<|endoftext|>")
    mini35 = template("phi-3.5-mini-instruct", bos_token="<s>", eos_token="<|endoftext|>")

    def test_phi3_mini_drops_the_system_message(self) -> None:
        """The template has no branch for it; every user turn opens the assistant's."""
        assert self.mini.render(CONVERSATION) == "<s>" + PHI3_TURNS
        assert self.mini.render(CONVERSATION, add_generation_prompt=False) == "<s>" + PHI3_TURNS

    def test_phi35_mini_conversation(self) -> None:
        """llama.cpp's Phi-3 small/vision rendering; EOS instead of a generation prompt."""
        system = "<|system|>\nYou are a helpful assistant<|end|>\n"
        assert self.mini35.render(CONVERSATION) == system + PHI3_TURNS
        assert self.mini35.render(CONVERSATION, add_generation_prompt=False) == (
            system + PHI3_TURNS.removesuffix("<|assistant|>\n") + "<|endoftext|>"
        )

    def test_phi35_mini_empty_system_message(self) -> None:
        """An empty system message is left out."""
        empty = [{"role": "system", "content": ""}, *NO_SYSTEM]
        assert self.mini35.render(empty) == PHI3_TURNS


#: Cases of test-chat-template.cpp whose Jinja rendering is the template's own:
#: (name, template, expected rendering of CONVERSATION, bos_token, eos_token).
LLAMA_CPP_CASES = [
    (
        "teknium/OpenHermes-2.5-Mistral-7B",
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\\n' }}{% endif %}",
        "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello"
        "<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you"
        "<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user"
        "\nAnother question<|im_end|>\n<|im_start|>assistant\n",
        "",
        "",
    ),
    (
        "Llama-3",
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] "
        "| trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content "
        "%}{% endif %}{{ content }}{% endfor %}"
        "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}",
        "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>"
        "assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>"
        "\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an "
        "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question"
        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
        "",
        "",
    ),
    (
        "mistralai/Mistral-7B-Instruct-v0.2 ('v1' template with a system prompt)",
        "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = "
        "messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n"
        "    {%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for "
        "message in loop_messages %}\n    {%- if (message['role'] == 'user') != "
        "(loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system "
        "message, conversation roles must alternate user/assistant/user/assistant/...') }}\n"
        "    {%- endif %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first "
        "and system_message is defined %}\n            {{- ' [INST] ' + system_message + "
        "'\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            "
        "{{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    "
        "{%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + "
        "eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant "
        "roles are supported, with the exception of an initial optional system message!') }}"
        "\n    {%- endif %}\n{%- endfor %}\n",
        " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you "
        "[/INST]    I am an assistant   </s> [INST] Another question [/INST]",
        "",
        "</s>",
    ),
    (
        "mistralai/Mistral-Large-Instruct-2411 ('v7' template)",
        "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
        "{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}"
        "{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{% elif "
        "message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}{% else %}"
        "{{ raise_exception('Only user, system and assistant roles are supported!') }}"
        "{% endif %}{% endfor %}",
        "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi "
        "there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another "
        "question[/INST]",
        "",
        "</s>",
    ),
    (
        "phi-4",
        "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>"
        "system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == "
        "'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>"
        "<|im_start|>assistant<|im_sep|>'}}{% elif (message['role'] == 'assistant') %}"
        "{{message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}",
        "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user"
        "<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|>"
        "<|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am "
        "an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|>"
        "<|im_start|>assistant<|im_sep|>",
        "",
        "",
    ),
    (
        "mlabonne/AlphaMonarch-7B",
        "{% for message in messages %}{{bos_token + message['role'] + '\\n' + "
        "message['content'] + eos_token + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ bos_token + 'assistant\\n' }}{% endif %}",
        "<s>system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi "
        "there</s>\n<s>user\nWho are you</s>\n<s>assistant\n   I am an assistant   </s>\n"
        "<s>user\nAnother question</s>\n<s>assistant\n",
        "<s>",
        "</s>",
    ),
]


class TestLlamaCppCases:
    """More templates, against llama.cpp's expected renderings verbatim."""

    @pytest.mark.parametrize(
        ("source", "expected", "bos", "eos"),
        [case[1:] for case in LLAMA_CPP_CASES],
        ids=[case[0] for case in LLAMA_CPP_CASES],
    )
    def test_rendering(self, source: str, expected: str, bos: str, eos: str) -> None:
        """The conversation renders exactly as llama.cpp's test expects."""
        chat = ChatTemplate(source, bos_token=bos, eos_token=eos)
        assert chat.render(CONVERSATION) == expected
