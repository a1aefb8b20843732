"""llama-cpp-python's C API for the text layer, loaded once per process, its log captured.

llama.cpp writes its log to stderr unless told otherwise: every vocabulary load prints
dozens of lines (metadata, cache sizes, warnings about the file's special tokens).
:func:`llama_api` imports the binding's low-level module, installs one log callback
that sends each complete line to the Python logger ``switchboard.text.llama`` and keeps
the last error lines for :func:`recent_errors`, then runs ``llama_backend_init`` once.
Errors are logged at error level; warnings at info, because every worker and
detokenizer loads the same vocabulary and would repeat the same warnings about the
file's tokens (the engine that loads the whole model reports them once); everything
else at debug.

The binding's own package import installs a callback that prints everything to stderr;
ours replaces it, which is why the import and the install happen together here.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import deque
from types import ModuleType
from typing import Any

__all__ = ["INSTALL_HINT", "LlamaUnavailable", "llama_api", "recent_errors"]

log = logging.getLogger("switchboard.text.llama")

#: How to get the binding, said whenever it is missing.
INSTALL_HINT = "install the llama extra: pip install -e '.[llama]' (or make llama)"

#: ggml.h ``enum ggml_log_level`` (the binding's ``_logger.py`` still has an older order).
_GGML_WARN, _GGML_ERROR, _GGML_CONT = 3, 4, 5
#: Errors go to debug too: every one is said by the call that failed (its message is
#: built from :func:`recent_errors`), so that a model that cannot load is one line.
_LEVELS = {_GGML_WARN: logging.INFO}

_lock = threading.Lock()
#: The module under "api"; the callback under "callback", referenced for the life of the
#: process because llama.cpp keeps only a raw pointer to it.
_loaded: dict[str, Any] = {}
#: The last error lines llama.cpp logged, newest last.
_errors: deque[str] = deque(maxlen=16)


class _LineBuffer:
    """The line being logged: llama.cpp may send one line in several calls (``CONT``)."""

    def __init__(self) -> None:
        self.level = 0
        self.parts: list[str] = []


_line = _LineBuffer()


class LlamaUnavailable(RuntimeError):
    """llama-cpp-python cannot be imported (the ``llama`` extra is not installed)."""


def _on_log(level: int, text: bytes | None, _user_data: Any) -> None:
    """Collect llama.cpp's log into whole lines and pass each to :data:`log`."""
    chunk = (text or b"").decode("utf-8", errors="replace")
    if level != _GGML_CONT:
        _line.level, _line.parts = level, []
    _line.parts.append(chunk)
    if not chunk.endswith("\n"):
        return
    line = "".join(_line.parts).strip()
    _line.parts = []
    if not line:
        return
    if _line.level == _GGML_ERROR:
        _errors.append(line)
    log.log(_LEVELS.get(_line.level, logging.DEBUG), "%s", line)


def llama_api() -> ModuleType:
    """``llama_cpp.llama_cpp``, its log captured and its backend initialised, once.

    Raises :class:`LlamaUnavailable` (saying which extra to install) when the binding
    cannot be imported.
    """
    with _lock:
        if "api" in _loaded:
            api: ModuleType = _loaded["api"]
            return api
        try:
            from llama_cpp import llama_cpp as api
        except ImportError as error:
            raise LlamaUnavailable(f"llama-cpp-python is not installed; {INSTALL_HINT}") from error
        # The binding raises these when its shared library is missing or will not load.
        except (OSError, RuntimeError) as error:
            reason = f"llama-cpp-python cannot load llama.cpp ({error}); {INSTALL_HINT}"
            raise LlamaUnavailable(reason) from error
        callback = api.llama_log_callback(_on_log)
        api.llama_log_set(callback, ctypes.c_void_p(0))
        api.llama_backend_init()
        _loaded["callback"] = callback
        _loaded["api"] = api
        return api


def recent_errors() -> list[str]:
    """The error lines llama.cpp logged since the last call, oldest first (then forgotten)."""
    with _lock:
        lines = list(_errors)
        _errors.clear()
        return lines
