"""The worker's one way to the admin app: an operator's request passed on as it came.

SGLang's operator endpoints on the serving port (:mod:`switchboard.worker.sglang_ops`)
do nothing themselves: :meth:`AdminClient.forward` sends the request's body, untouched,
to the admin app's endpoint of the same name (``POST /pause_generation``,
``/continue_generation``, ``/abort_request``, its SGLang aliases of ``/api/pause``,
``/api/continue`` and ``/api/abort``) with the caller's ``Authorization`` header as it
came (or none), so the admin app decides the token before the body, checks the role,
validates the body and writes the audit record exactly as for its own callers, refused
attempts included. The worker holds no token and decides nothing about who may act.

Every way the call can fail is translated here, once, into an :class:`AdminRefusal`: the
status and the message the worker answers with, in its error shape
(:func:`~switchboard.worker.errors.error_body`), each message naming the admin app:

* no admin URL configured: 503 ``admin_not_configured``, nothing sent;
* the admin app refuses the request: 401 (no token, or an unknown one; the message says
  where an operator token is) or 403 (a viewer's token);
* the admin app is down, or silent past the bounded timeout: 503 ``admin_unavailable``;
* a barrier not acknowledged in time: 504, the operation kept under ``operation``;
* a bad body (400), a body too large (413) and the router being unreachable (503) keep
  the admin app's status and message; any other answer is a 502.

A fresh client per call: operator commands are rare, and a per-call client has nothing
to open or close with the app. ``trust_env`` is off, so no proxy variable can send the
token anywhere but ``url``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import httpx

__all__ = [
    "CONNECT_TIMEOUT_S",
    "OPERATOR_CREDENTIALS_HINT",
    "REPLY_MARGIN_S",
    "AdminClient",
    "AdminRefusal",
]

#: Seconds to connect to the admin app (it is local, or near).
CONNECT_TIMEOUT_S: Final = 2.0
#: Seconds the admin app gets beyond the command's own wait (a barrier's ``timeout_s``)
#: before the worker stops waiting for it.
REPLY_MARGIN_S: Final = 5.0
#: Where an operator's token comes from, for the 401s.
OPERATOR_CREDENTIALS_HINT: Final = (
    "an operator token is the console URL's #token=... on switchboard up's serving line, "
    "one of SWITCHBOARD_ADMIN_OPERATOR_TOKENS, or switchboard up's --api-key"
)
#: How much of a non-JSON answer a message quotes.
_QUOTED_CHARS: Final = 200
#: Admin answers passed on with their own status and message.
_KEPT_STATUSES: Final = frozenset({400, 413})


@dataclass
class AdminRefusal(Exception):
    """An operator request answered with an error: ``status``, the error's ``kind``
    (``type``) and ``message``; ``reason`` labels it in ``http_rejected``. ``extra``
    goes into the error object beside them, ``headers`` into the answer."""

    status: int
    kind: str
    message: str
    reason: str
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def _error_of(response: httpx.Response) -> tuple[str, str | None, dict[str, Any]]:
    """The admin app's error message and code, and the rest of its body (a timed-out
    barrier's operation), from an error answer in its shape; else its text."""
    try:
        body = response.json()
        error = body["error"]
        rest = {key: value for key, value in body.items() if key != "error"}
        return str(error["message"]), str(error.get("code")), rest
    except (ValueError, KeyError, TypeError):
        return response.text[:_QUOTED_CHARS] or "(no body)", None, {}


class AdminClient:
    """Forwards operator requests to the admin app at ``url`` (empty: none configured).

    ``transport`` is httpx's (a mock one in tests); by default, a real connection.
    """

    def __init__(self, url: str, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self._transport = transport

    def check_configured(self) -> None:
        """AdminRefusal 503 when this worker has no admin app to forward to."""
        if not self.url:
            raise AdminRefusal(
                503,
                "service_unavailable",
                "this worker has no admin app to send operator commands to: start it with "
                "--admin-url (switchboard up passes its admin app's)",
                "admin_not_configured",
            )

    async def forward(
        self, path: str, body: bytes, authorization: str | None, *, wait_s: float = 0.0
    ) -> dict[str, Any]:
        """The admin app's JSON answer to ``POST path`` with ``body`` (as JSON) and the
        caller's ``authorization`` header, if any; it may take ``wait_s`` (a barrier's
        timeout) plus :data:`REPLY_MARGIN_S`. Raises :class:`AdminRefusal` for every
        failure (see the module docstring)."""
        self.check_configured()
        headers = {"Content-Type": "application/json"}
        if authorization is not None:
            headers["Authorization"] = authorization
        timeout = httpx.Timeout(wait_s + REPLY_MARGIN_S, connect=CONNECT_TIMEOUT_S)
        try:
            async with httpx.AsyncClient(
                base_url=self.url,
                timeout=timeout,
                transport=self._transport,
                trust_env=False,
                follow_redirects=False,
            ) as client:
                response = await client.post(path, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise self._unavailable(f"did not answer within {timeout.read:g} s") from exc
        except httpx.TransportError as exc:
            raise self._unavailable(f"does not answer ({type(exc).__name__}: {exc})") from exc
        if response.is_success:
            answer: dict[str, Any] = response.json()
            return answer
        raise self._refusal(response, token_sent=authorization is not None)

    def _unavailable(self, what: str) -> AdminRefusal:
        return AdminRefusal(
            503,
            "service_unavailable",
            f"the admin app at {self.url} {what}; operator commands go through it",
            "admin_unavailable",
            headers={"Retry-After": "1"},
        )

    def _refusal(self, response: httpx.Response, *, token_sent: bool) -> AdminRefusal:
        """The worker's answer to the admin app's error ``response``."""
        message, code, rest = _error_of(response)
        status, at = response.status_code, f"the admin app at {self.url}"
        if status == 401:
            said = (
                f"{at} refused the token ({message})"
                if token_sent
                else f"this needs Authorization: Bearer <token>, an operator token of {at}, "
                "which checks and audits it"
            )
            return AdminRefusal(
                401,
                "authentication_error",
                f"{said}; {OPERATOR_CREDENTIALS_HINT}",
                "unauthorized",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if status == 403:
            return AdminRefusal(403, "permission_error", f"{at}: {message}", "forbidden")
        if status in _KEPT_STATUSES:
            return AdminRefusal(status, "invalid_request_error", message, "invalid_request")
        if status == 504 and code == "timeout":
            extra = {"operation": rest}
            return AdminRefusal(504, "timeout", message, "barrier_timeout", extra=extra)
        if status == 503:
            retry = {"Retry-After": response.headers.get("Retry-After", "1")}
            return AdminRefusal(
                503, "service_unavailable", f"{at}: {message}", "router_unavailable", retry
            )
        return AdminRefusal(502, "bad_gateway", f"{at} answered {status}: {message}", "admin_error")
