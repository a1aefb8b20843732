"""One error shape for every failure: ``{"error": {"code": "<snake_case>", "message": "..."}}``.

:class:`ApiException` carries the status, code and message; the router's control errors
are translated once, in :func:`from_control_error`; FastAPI's validation errors become
400 ``bad_request`` (never 422), each problem worded as the field, what it should be and
what it is (``timeout_s: should be a number, not the string "5"``); Starlette's HTTP
errors keep their status with the matching code and say what was asked (``no path
/api/nope``; ``GET is not allowed on /api/pause; it takes POST``, with ``Allow``).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.models import ApiError, ErrorBody, ErrorCode
from httpkit.refusals import routing_message
from router_core.control import ControlError, ControlTimeout
from router_core.control import ErrorCode as ControlCode

__all__ = [
    "ERROR_RESPONSES",
    "ApiException",
    "error_responses",
    "from_control_error",
    "install_error_handlers",
    "json_kind",
]


class ApiException(Exception):
    """Answer ``status`` with ``{"error": {"code": code, "message": message}}``."""

    def __init__(
        self,
        status: int,
        code: ErrorCode,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code: ErrorCode = code
        self.message = message
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return ErrorBody(error=ApiError(code=self.code, message=self.message)).model_dump()

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


#: Control error codes and the answer each becomes; anything else means the router
#: could not do what it was asked for a reason of its own (503).
_CONTROL: dict[ControlCode, tuple[int, ErrorCode]] = {
    ControlCode.NOT_FOUND: (404, "not_found"),
    ControlCode.CONFLICT: (409, "conflict"),
    ControlCode.BAD_ARGUMENTS: (400, "bad_request"),
    ControlCode.ENGINE_FAILED: (502, "engine_failed"),
    ControlCode.ENGINE_TIMEOUT: (504, "timeout"),
}


def from_control_error(error: ControlError) -> ApiException:
    """The answer to a failed control call; a router that does not answer is a 503."""
    if isinstance(error, ControlTimeout):
        return ApiException(
            503,
            "router_unavailable",
            f"the router did not answer: {error.message}",
            {"Retry-After": "1"},
        )
    status, code = _CONTROL.get(error.code, (503, "router_unavailable"))
    message = error.message if status != 503 else f"the router failed: {error}"
    return ApiException(status, code, message)


#: HTTP statuses Starlette raises itself, and their codes.
_HTTP_CODES: dict[int, ErrorCode] = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
}

#: What each error status means, for the OpenAPI schema.
ERROR_RESPONSES: dict[int, str] = {
    400: "bad_request: the body or a parameter is invalid",
    401: "unauthorized: no token, or a token nobody has",
    403: "forbidden: a viewer token on an operator's endpoint",
    404: "not_found: no such worker",
    409: "conflict: the command does not apply in the current state (the worker's, or "
    "the engine's: requests running)",
    413: "body_too_large: the body is over max_body_bytes",
    502: "engine_failed: the engine tried the command and failed, or does not know it "
    "(the message says which, and why)",
    503: "router_unavailable: the router does not answer; too_many_streams: every "
    "/api/events stream the app serves is open",
    504: "timeout: the engine did not answer the command in time",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` documenting ``statuses`` with the error body."""
    return {
        status: {"model": ErrorBody, "description": ERROR_RESPONSES[status]} for status in statuses
    }


#: The longest piece of a refused value an error message quotes.
_SHOWN_CHARS = 40


def json_kind(value: Any) -> str:
    """A decoded JSON ``value`` as an error message names it: ``null``, ``true``, ``5``,
    ``the string "5"``, ``an array``, ``an object`` (strings ASCII-escaped and cut)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        shown = json.dumps(value[:_SHOWN_CHARS])
        return f"the string {shown}" + ("..." if len(value) > _SHOWN_CHARS else "")
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


#: Where FastAPI says a refused value was: left out of the message, the name says it.
_PLACES = frozenset({"body", "query", "path", "header"})
#: Pydantic's wording of a problem, and an operator's.
_RULES = {
    "extra_forbidden": "not a field of this request",
    "missing": "a required field, missing",
}


def _problem_message(problem: Any) -> str:
    """One validation problem: where, what it should be, and what it is."""
    location = [str(part) for part in problem.get("loc", ())]
    if location and location[0] in _PLACES:
        location = location[1:]
    where = ".".join(location) or "the body"
    kind = problem.get("type", "")
    if kind in _RULES:
        return f"{where}: {_RULES[kind]}"
    said = str(problem.get("msg", "invalid"))
    if said.startswith("Input should be "):
        wanted = said.removeprefix("Input should be ").replace("a valid ", "a ", 1)
        said = f"should be {wanted}"
        if "input" in problem:
            said += f", not {json_kind(problem['input'])}"
    return f"{where}: {said}"


def _validation_message(error: RequestValidationError) -> str:
    problems = [_problem_message(problem) for problem in error.errors()]
    return "; ".join(problems) or "invalid request"


def _http_message(request: Request, error: StarletteHTTPException) -> str:
    """Starlette's own refusals in words that say what was asked."""
    return routing_message(
        request.method, request.url.path, error.status_code, str(error.detail), error.headers
    )


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error with the one JSON shape."""

    async def on_api(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, ApiException)
        return error.response()

    async def on_validation(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        return ApiException(400, "bad_request", _validation_message(error)).response()

    async def on_http(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        code = _HTTP_CODES.get(error.status_code, "bad_request")
        headers = dict(error.headers) if error.headers else None
        message = _http_message(request, error)
        return ApiException(error.status_code, code, message, headers).response()

    app.add_exception_handler(ApiException, on_api)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
