"""What a routing refusal says, in the words of the request: pure.

Starlette refuses a path no route has with ``404 Not Found`` and a method a route does not
take with ``405 Method Not Allowed`` (its ``Allow`` header listing the methods). Both apps
answer in their own error shape but with one wording, naming what was asked:
``no path /nope``; ``GET is not allowed on /generate; it takes POST``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["routing_message"]


def routing_message(
    method: str, path: str, status: int, detail: str, headers: Mapping[str, str] | None
) -> str:
    """The message for Starlette's refusal ``status`` (with its ``detail`` and headers) of
    ``method path``; any other refusal keeps its own detail."""
    if status == 404 and detail == "Not Found":
        return f"no path {path}"
    if status == 405:
        allowed = (headers or {}).get("Allow", "")
        takes = f"; it takes {allowed}" if allowed else ""
        return f"{method} is not allowed on {path}{takes}"
    return detail
