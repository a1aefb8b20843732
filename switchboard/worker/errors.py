"""How the worker answers what it cannot serve: one JSON error shape, counted by reason.

Every error body is OpenAI's ``{"error": {"message", "type", "param", "code"}}``, which
SGLang's native endpoints also use. A stopping worker answers 503 with ``Retry-After``;
bad input answers 400 (never 422), a request over a cap 400 naming it (``cap`` and
``limit`` besides), a body not declared as JSON 415, an unknown model 404; an unknown
path 404 and a wrong method 405 (with ``Allow``), each naming what was asked.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from httpkit.refusals import routing_message
from router_core.counters import Counters
from router_core.worker_link import AdmissionRefused, RequestLost, RouterUnavailable
from switchboard.worker.caps import CapExceeded
from switchboard.worker.disconnect import ClientDisconnected
from switchboard.worker.generation import ContextTooLong, PromptError, RequestAborted
from switchboard.worker.json_body import BodyRefused
from switchboard.worker.metrics import BAD_REQUEST_STATUSES, NO_METRICS, Metrics

__all__ = ["ModelNotFound", "error_body", "install_error_handlers"]


class ModelNotFound(LookupError):
    """The request names a model this worker does not serve."""


def error_body(message: str, kind: str, code: int, param: str | None = None) -> dict[str, Any]:
    """The JSON error body."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def lost_body(error: RequestLost) -> dict[str, Any]:
    """The error body of a request lost to a fault; ``code`` is its status and ``param``
    stays None, ``cause`` names the fault in one word."""
    body = error_body(str(error), "service_unavailable", error.status)
    body["error"]["cause"] = error.cause
    return body


def stream_error(error: Exception) -> dict[str, Any]:
    """The ``error`` event that ends a stream whose headers were already sent."""
    if isinstance(error, RequestLost):
        return lost_body(error)
    return {"error": {"message": str(error), "type": type(error).__name__}}


#: Type names pydantic puts in an error's location for the branches of a union.
_BRANCH_TYPES = frozenset({"str", "int", "float", "bool", "dict", "list", "none", "one", "each"})


def _client_location(location: tuple[Any, ...]) -> list[str]:
    """An error's location in the client's terms: the body's fields and list indices,
    without the union branches pydantic adds (``list[NativeSamplingParams]``,
    ``NativeSamplingParams``, ``str``, tags such as ``one``): field names are
    snake_case, branch names are types."""
    shown = []
    for part in location:
        if part == "body":
            continue
        if isinstance(part, str) and (
            part in _BRANCH_TYPES or part[:1].isupper() or any(c in part for c in "[<-")
        ):
            continue
        shown.append(str(part))
    return shown


def _validation_message(error: RequestValidationError) -> tuple[str, str | None]:
    """One line naming every problem at its field, and the first field (``param``).
    Problems at one field (a value no branch of a union takes) are joined with "or".
    When one branch got as far as a feature this server lacks, that is the only problem
    named: the other branches' complaints ("should be a string") would mislead."""
    problems: dict[str, list[str]] = {}
    param = None
    found = error.errors()
    unsupported = [problem for problem in found if problem.get("type") == "not_supported"]
    for problem in unsupported or found:
        location = _client_location(tuple(problem.get("loc", ())))
        if param is None and location:
            param = location[0]
        said = problems.setdefault(".".join(location) or "body", [])
        message = str(problem.get("msg", "invalid"))
        if message not in said:
            said.append(message)
    lines = [f"{where}: {_either(messages)}" for where, messages in problems.items()]
    return "; ".join(lines) or "invalid request", param


_SHOULD_BE = "Input should be "
#: pydantic's wording of a model's type, which names our class, in JSON's terms.
_MODEL_TYPE = re.compile(r"a valid dictionary or instance of \w+")


def _either(messages: list[str]) -> str:
    """``messages`` about one value as one phrase: "Input should be a valid string or a
    valid list"."""
    shown = [_MODEL_TYPE.sub("a JSON object", message) for message in messages]
    if all(message.startswith(_SHOULD_BE) for message in shown):
        shown = [shown[0], *(message.removeprefix(_SHOULD_BE) for message in shown[1:])]
    return " or ".join(shown)


def _prompt_body(error: Exception) -> dict[str, Any]:
    """The body of a refused prompt; one too long for the context has OpenAI's code."""
    if isinstance(error, ContextTooLong):
        body = error_body(str(error), "invalid_request_error", 400, error.param)
        body["error"]["code"] = "context_length_exceeded"
        return body
    return error_body(str(error), "invalid_request_error", 400, getattr(error, "param", None))


def install_error_handlers(
    app: FastAPI, counters: Counters, retry_after_s: int, metrics: Metrics = NO_METRICS
) -> None:
    """Map the worker's exceptions to responses, counting each under ``http_rejected``
    (and, for bad input, in ``metrics``)."""

    def reject(reason: str, status: int, body: dict[str, Any], **headers: str) -> JSONResponse:
        counters.add("http_rejected", reason)
        if status in BAD_REQUEST_STATUSES:
            metrics.bad_request(reason)
        return JSONResponse(body, status_code=status, headers=headers or None)

    async def on_validation(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        message, param = _validation_message(error)
        body = error_body(message, "invalid_request_error", 400, param)
        return reject("invalid_request", 400, body)

    async def on_prompt(request: Request, error: Exception) -> JSONResponse:
        return reject("invalid_prompt", 400, _prompt_body(error))

    async def on_body(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, BodyRefused)
        body = error_body(error.message, "invalid_request_error", error.status, error.param)
        # RFC 9110, 15.5.16: a 415 may say which media type the server takes.
        headers = {"Accept-Post": "application/json"} if error.status == 415 else {}
        return reject(error.reason, error.status, body, **headers)

    async def on_cap(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, CapExceeded)
        body = error_body(str(error), "invalid_request_error", 400, error.param)
        body["error"].update(cap=error.cap, limit=error.limit)
        return reject("over_cap", 400, body)

    async def on_model(request: Request, error: Exception) -> JSONResponse:
        body = error_body(str(error), "invalid_request_error", 404, "model")
        body["error"]["code"] = "model_not_found"
        return reject("model_not_found", 404, body)

    async def on_admission(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, AdmissionRefused)
        retry = retry_after_s if error.reason != "not_registered" else 1
        message = {
            "stopping": "this worker is shutting down; retry on another worker",
            "paused_too_long": "generation is paused and stayed paused past this worker's "
            "pause wait; retry later",
        }.get(error.reason, "this worker is not registered with the router yet")
        body = error_body(message, "service_unavailable", 503)
        return reject(error.reason, 503, body, **{"Retry-After": str(retry)})

    async def on_router(request: Request, error: Exception) -> JSONResponse:
        body = error_body(str(error), "service_unavailable", 503)
        return reject("router_unavailable", 503, body, **{"Retry-After": "1"})

    async def on_aborted(request: Request, error: Exception) -> JSONResponse:
        body = error_body(str(error), "service_unavailable", 503)
        return reject("aborted", 503, body, **{"Retry-After": str(retry_after_s)})

    async def on_lost(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestLost)
        return reject(f"lost_{error.cause}", error.status, lost_body(error), **{"Retry-After": "1"})

    async def on_disconnected(request: Request, error: Exception) -> JSONResponse:
        # Nobody reads this answer (nginx's 499); the request was aborted in the engine.
        body = error_body("the client closed the connection", "client_closed_request", 499)
        return reject("client_disconnected", 499, body)

    async def on_http(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        status, path = error.status_code, request.url.path
        message = routing_message(request.method, path, status, str(error.detail), error.headers)
        body = error_body(message, "invalid_request_error", status)
        # A 405 keeps Starlette's Allow header (RFC 9110, 15.5.6: it must list the methods).
        return reject(f"http_{status}", status, body, **dict(error.headers or {}))

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(PromptError, on_prompt)
    app.add_exception_handler(BodyRefused, on_body)
    app.add_exception_handler(CapExceeded, on_cap)
    app.add_exception_handler(ModelNotFound, on_model)
    app.add_exception_handler(AdmissionRefused, on_admission)
    app.add_exception_handler(RouterUnavailable, on_router)
    app.add_exception_handler(RequestAborted, on_aborted)
    app.add_exception_handler(RequestLost, on_lost)
    app.add_exception_handler(ClientDisconnected, on_disconnected)
    app.add_exception_handler(StarletteHTTPException, on_http)
