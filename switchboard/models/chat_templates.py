"""The chat template a generated model carries (``tokenizer.chat_template``), so that
chat completions work on it out of the box, through Switchboard and llama.cpp's own
server alike.

A vocabulary that brings a template keeps it. Otherwise the template is chosen by the
vocabulary's special tokens: one with ``<|im_start|>`` and ``<|im_end|>`` (the built-in
tokenizer's) gets a ChatML template, any other a Llama 2 style one (``[INST]`` turns
between the BOS and EOS tokens), which needs nothing but those two. Both are written
here for these models; real models bring their own.
"""

from __future__ import annotations

from typing import Final

from gguf import GGUFValueType

from switchboard.models.vocab import TOKEN_LIST_KEY, MetadataEntry, Vocabulary

__all__ = ["CHATML_TEMPLATE", "CHAT_TEMPLATE_KEY", "INST_TEMPLATE", "with_chat_template"]

#: The GGUF key of a model's chat template.
CHAT_TEMPLATE_KEY: Final = "tokenizer.chat_template"

#: ChatML turns; a system message is a turn like any other.
CHATML_TEMPLATE: Final = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

#: Llama 2 style turns: a system message is folded into the first user turn.
INST_TEMPLATE: Final = (
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set system = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}"
    "{% set turns = messages[1:] %}"
    "{% else %}{% set system = '' %}{% set turns = messages %}{% endif %}"
    "{% for message in turns %}"
    "{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + (system if loop.first else '') + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + message['content'] + eos_token }}"
    "{% else %}{{ raise_exception('only user and assistant turns after the system message') }}"
    "{% endif %}{% endfor %}"
)


def _has_tokens(vocab: Vocabulary, *wanted: str) -> bool:
    tokens = vocab.find(TOKEN_LIST_KEY)
    assert tokens is not None and isinstance(tokens.value, list | tuple)  # a Vocabulary's
    present = {token.decode() if isinstance(token, bytes) else token for token in tokens.value}
    return set(wanted) <= present


def with_chat_template(vocab: Vocabulary) -> Vocabulary:
    """``vocab``, with a chat template entry when it has none (see the module docstring)."""
    if vocab.find(CHAT_TEMPLATE_KEY) is not None:
        return vocab
    chatml = _has_tokens(vocab, "<|im_start|>", "<|im_end|>")
    template = CHATML_TEMPLATE if chatml else INST_TEMPLATE
    entry = MetadataEntry(CHAT_TEMPLATE_KEY, template, GGUFValueType.STRING)
    return Vocabulary(entries=(*vocab.entries, entry))
