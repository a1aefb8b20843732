"""llama-cpp-python's C API, loaded once, with llama.cpp's log captured.

llama.cpp writes its log (model metadata, tensor lists, warnings) to stderr by default:
hundreds of lines per load. :func:`llama_api` installs one log callback per process that
sends each line to the Python logger ``switchboard.llama_cpp`` at debug level (warnings at
warning level) and remembers the last error lines, which :func:`recent_errors` hands to
whoever turns the failed call into its message: an error is said once, by the caller
that failed, so a model that cannot load is one line at start.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import deque
from types import ModuleType
from typing import Any

__all__ = ["LlamaUnavailable", "llama_api", "recent_errors"]

log = logging.getLogger("switchboard.llama_cpp")

#: What ``pip`` installs the binding as, said when it is missing.
INSTALL_HINT = "install the llama extra: pip install 'switchboard[llama]' (or make llama)"

#: ggml's log levels (ggml.h ``enum ggml_log_level``).
_GGML_WARN, _GGML_ERROR, _GGML_CONT = 3, 4, 5
_LEVELS = {_GGML_WARN: logging.WARNING}

_lock = threading.Lock()
#: The loaded API under "api", and the log callback under "callback", kept referenced
#: because the C side holds only a pointer to it.
_loaded: dict[str, Any] = {}
_errors: deque[str] = deque(maxlen=8)
_partial: list[str] = []


class LlamaUnavailable(RuntimeError):
    """The llama-cpp-python binding cannot be imported."""


def _on_log(level: int, text: bytes | None, _user_data: Any) -> None:
    line = (text or b"").decode("utf-8", errors="replace")
    if level == _GGML_CONT and _partial:
        _partial.append(line)
    else:
        _partial[:] = [line]
    if not line.endswith("\n"):
        return
    message = "".join(_partial).strip()
    _partial.clear()
    if not message:
        return
    if level == _GGML_ERROR:
        _errors.append(message)
    log.log(_LEVELS.get(level, logging.DEBUG), "%s", message)


def llama_api() -> ModuleType:
    """``llama_cpp.llama_cpp``, its backend initialised and its log captured (once).

    Raises :class:`LlamaUnavailable` naming the extra to install.
    """
    with _lock:
        if "api" in _loaded:
            loaded: ModuleType = _loaded["api"]
            return loaded
        try:
            import llama_cpp.llama_cpp as api
        except ImportError as error:
            raise LlamaUnavailable(f"llama-cpp-python is not installed: {INSTALL_HINT}") from error
        _loaded["callback"] = api.llama_log_callback(_on_log)
        api.llama_log_set(_loaded["callback"], ctypes.c_void_p(0))
        api.llama_backend_init()
        _loaded["api"] = api
        return api


def recent_errors(clear: bool = True) -> list[str]:
    """llama.cpp's error lines since the last call (or all kept, without ``clear``)."""
    lines = list(_errors)
    if clear:
        _errors.clear()
    return lines
