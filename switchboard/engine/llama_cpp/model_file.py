"""A model path checked and loaded, or one line saying why not.

:func:`check_model_file` refuses, before llama.cpp sees it, a path that does not exist,
is not a regular file, cannot be read, or does not start with the GGUF magic.
:func:`load_model` then lets llama.cpp load it; when llama.cpp refuses (an architecture
it does not know, a truncated file, a tensor of the wrong shape), the reason is
llama.cpp's own last error line. Both raise :class:`ModelFileError`, whose text is
``model PATH: REASON``, fit for a one-line error at start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from switchboard.text.gguf_file import GGUF_MAGIC
from switchboard.text.llama_runtime import llama_api, recent_errors

__all__ = ["ModelFileError", "check_model_file", "load_model"]


class ModelFileError(Exception):
    """A model file that cannot be served: ``model PATH: REASON``."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"model {os.fspath(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason


def check_model_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`Path` if it is a readable GGUF file; else :class:`ModelFileError`."""
    file = Path(path)
    if not file.exists():
        raise ModelFileError(path, "no such file")
    if not file.is_file():
        raise ModelFileError(path, "not a regular file (expected a .gguf model file)")
    try:
        with file.open("rb") as stream:
            magic = stream.read(len(GGUF_MAGIC))
    except OSError as error:
        raise ModelFileError(path, f"cannot be read: {error.strerror or error}") from error
    if magic != GGUF_MAGIC:
        raise ModelFileError(path, "not a GGUF file (it does not start with the GGUF magic)")
    return file


def _reason(fallback: str) -> str:
    errors = [line for line in recent_errors() if line]
    # llama.cpp's last line is a generic "failed to load model"; the cause comes before.
    specific = [line for line in errors if "failed to load model" not in line]
    text = (specific or errors or [fallback])[-1]
    return " ".join(text.replace("llama_model_load: error loading model:", "").split())


def load_model(path: str | os.PathLike[str], *, vocab_only: bool = False) -> Any:
    """The llama.cpp model at ``path`` (a ``llama_model_p``); the caller frees it.

    Raises :class:`ModelFileError` with llama.cpp's reason when it cannot be loaded.
    """
    file = check_model_file(path)
    api = llama_api()
    params = api.llama_model_default_params()
    params.vocab_only = vocab_only
    recent_errors()  # forget what earlier calls logged
    model = api.llama_model_load_from_file(os.fsencode(file), params)
    if not model:
        raise ModelFileError(path, _reason("llama.cpp could not load it"))
    return model
