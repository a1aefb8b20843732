"""A GGUF path checked and its vocabulary loaded by llama.cpp, or one line saying why not.

:func:`load_gguf_tokenizer` refuses, before llama.cpp sees it, a path that does not
exist, is not a regular file, cannot be read or does not start with the GGUF magic; then
llama.cpp loads the vocabulary alone (``vocab_only``), and when it refuses (a truncated
file, a bad version) the reason is llama.cpp's own error lines. Every refusal is a
:class:`~switchboard.text.codec.TokenizerLoadError` naming the path.
"""

from __future__ import annotations

import os
from pathlib import Path

from switchboard.text.codec import TokenizerLoadError
from switchboard.text.gguf_tokenizer import GgufTokenizer
from switchboard.text.llama_runtime import (
    INSTALL_HINT,
    LlamaUnavailable,
    llama_api,
    recent_errors,
)

__all__ = ["GGUF_MAGIC", "is_gguf_file", "load_gguf_tokenizer"]

#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"


def is_gguf_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a readable file starting with the GGUF magic."""
    try:
        with open(path, "rb") as stream:
            return stream.read(len(GGUF_MAGIC)) == GGUF_MAGIC
    except OSError:
        return False


def _load_reason() -> str:
    """llama.cpp's own reason for the load that just failed, on one line."""
    lines = [line for line in recent_errors() if "failed to load model" not in line]
    causes = [line.split(": ", 1)[-1] if ": " in line else line for line in lines]
    return "; ".join(" ".join(cause.split()) for cause in causes) or "no reason given"


def load_gguf_tokenizer(
    path: str | os.PathLike[str], *, eos_token: str | None = None
) -> GgufTokenizer:
    """The tokenizer of the GGUF model at ``path``, its vocabulary loaded by llama.cpp.

    Raises :class:`~switchboard.text.codec.TokenizerLoadError` naming ``path`` when
    it is missing, not a file, not GGUF, cannot be loaded by llama.cpp (with llama.cpp's
    reason), or when llama-cpp-python is not installed (saying which extra to install).
    """
    given = os.fspath(path)
    file = Path(path)
    if not file.exists():
        raise TokenizerLoadError(given, "not found (expected a GGUF model file)")
    if not file.is_file():
        raise TokenizerLoadError(given, "not a regular file (expected a GGUF model file)")
    try:
        with file.open("rb") as stream:
            magic = stream.read(len(GGUF_MAGIC))
    except OSError as error:
        raise TokenizerLoadError(given, f"cannot be read: {error}") from error
    if magic != GGUF_MAGIC:
        reason = "not a GGUF file (it does not start with the GGUF magic)"
        raise TokenizerLoadError(given, reason)
    try:
        api = llama_api()
    except LlamaUnavailable as error:
        reason = f"a GGUF tokenizer needs llama-cpp-python; {INSTALL_HINT}"
        raise TokenizerLoadError(given, reason) from error
    params = api.llama_model_default_params()
    params.vocab_only = True
    recent_errors()  # forget what earlier loads logged
    model = api.llama_model_load_from_file(os.fsencode(file), params)
    if not model:
        raise TokenizerLoadError(given, f"llama.cpp cannot load it: {_load_reason()}")
    return GgufTokenizer(api, model, source=str(file), eos_token=eos_token)
