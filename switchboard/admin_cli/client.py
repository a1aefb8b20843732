"""The admin API over HTTP: one request in, JSON or an :class:`AdminCliError` out.

Every httpx failure and every error status is translated here, once, into the error
that carries the command's exit status; nothing above this module sees httpx.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from switchboard.admin_cli.arguments import token_problem, url_problem
from switchboard.admin_cli.errors import (
    ApiError,
    AuthFailed,
    OperationFailed,
    Unreachable,
    UsageProblem,
)

__all__ = ["AdminClient", "Answer", "api_error", "check_token", "check_url"]

#: What an error body may say before it stops being one line worth reading.
_MAX_MESSAGE = 300


@dataclass(frozen=True)
class Answer:
    """A response the caller accepted: its status and its decoded JSON body."""

    status: int
    body: Any


def check_url(url: str) -> str:
    """``url`` without a trailing slash, if it is an ``http(s)://host[:port][/prefix]``
    (:func:`~switchboard.admin_cli.arguments.url_problem`)."""
    problem = url_problem(url)
    if problem is not None:
        raise UsageProblem(f"--url {url!r}: {problem}")
    return url.rstrip("/")


def check_token(token: str | None) -> str | None:
    """``token`` if a header can carry it (:func:`~switchboard.admin_cli.arguments.token_problem`;
    the error never repeats the token)."""
    problem = None if token is None else token_problem(token)
    if problem is not None:
        raise UsageProblem(f"the token {problem}")
    return token


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_MESSAGE else flat[: _MAX_MESSAGE - 3] + "..."


def _error_fields(body: Any) -> tuple[str | None, str | None]:
    """``(code, message)`` from ``{"error": {...}}``, or from FastAPI's ``{"detail": ...}``."""
    if not isinstance(body, dict):
        return None, None
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = error.get("code")
        return (code if isinstance(code, str) else None), error["message"]
    detail = body.get("detail")
    if isinstance(detail, str):
        return None, detail
    if isinstance(detail, list):
        problems = [
            f"{'.'.join(str(part) for part in item.get('loc', ()))}: {item.get('msg', '')}"
            for item in detail
            if isinstance(item, dict)
        ]
        return None, "; ".join(problems) or None
    return None, None


def api_error(status: int, body: Any, *, reason: str = "", had_token: bool = True) -> ApiError:
    """The error for an answer nobody accepted: :class:`AuthFailed` for 401 and 403."""
    code, message = _error_fields(body)
    if message is None:
        message = body if isinstance(body, str) and body.strip() else reason or "request failed"
    message = _one_line(message)
    if status == 401 and not had_token:
        message += "; give --token or set SWITCHBOARD_ADMIN_TOKEN"
    kind = AuthFailed if status in (401, 403) else ApiError
    return kind(status, code, message, body)


class AdminClient:
    """A connection to the admin app at ``url`` that sends ``token`` as a bearer token.

    Use it as a context manager; ``transport`` replaces the network in tests. Proxy
    variables are ignored: the bearer token goes to the admin app and nowhere else.
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        timeout_s: float,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = check_url(url)
        self._token = check_token(token)
        self._timeout_s = timeout_s
        self._transport = transport
        self._http: httpx.Client | None = None

    def __enter__(self) -> AdminClient:
        headers = {"Accept": "application/json", "User-Agent": "switchboard-cli"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=self._timeout_s,
            transport=self._transport,
            trust_env=False,
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def get(self, path: str) -> Any:
        """The JSON body of ``GET path``; any status but 200 raises."""
        return self.request("GET", path).body

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        timeout_s: float | None = None,
        accept: Collection[int] = (200,),
    ) -> Answer:
        """Send one request; the answer if its status is in ``accept``, else raise."""
        if self._http is None:
            raise RuntimeError("AdminClient is used outside its with block")
        timeout = self._timeout_s if timeout_s is None else timeout_s
        try:
            response = self._http.request(method, path, json=body, timeout=timeout)
        except httpx.UnsupportedProtocol as exc:
            raise UsageProblem(f"--url {self.url}: {exc}") from exc
        except httpx.ConnectTimeout as exc:
            raise Unreachable(f"cannot reach the admin app at {self.url}: timed out") from exc
        except httpx.TimeoutException as exc:
            raise OperationFailed(
                f"no answer from the admin app at {self.url} within {timeout:g} s"
            ) from exc
        except httpx.TransportError as exc:
            reason = str(exc) or type(exc).__name__
            raise Unreachable(f"cannot reach the admin app at {self.url}: {reason}") from exc
        except httpx.InvalidURL as exc:
            raise UsageProblem(f"{self.url}{path}: {exc}") from exc
        return self._answer(response, path, accept)

    def _answer(self, response: httpx.Response, path: str, accept: Collection[int]) -> Answer:
        status = response.status_code
        try:
            body: Any = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            if status in accept:
                raise OperationFailed(
                    f"{self.url}{path} answered HTTP {status} without JSON; is --url the admin app?"
                ) from None
            body = response.text
        if status in accept:
            return Answer(status, body)
        raise api_error(
            status, body, reason=response.reason_phrase, had_token=self._token is not None
        )
