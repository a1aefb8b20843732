"""Every mutation the router answers, served from its command object alone.

For each command of the catalogue that changes the stack and that the tokenizer router
serves (pause, continue, drain, undrain, abort, freeze GC, ...), one route per path —
its admin path with a strict body, each SGLang alias with a lenient one
(:mod:`app.command_bodies`) — that turns the body and path into the command's argument
struct, sends it (:meth:`app.router_api.RouterApi.call`, as the operator who asked),
and answers the reply as the API shows its type (:mod:`app.replies`). A barrier that
did not complete is a 504 carrying the operation, its stragglers named, and an
``error``. The request's audit record gets the command's ``audit`` arguments and the
reply's account (``mode=retract op=7-3 acked=engine,w0``).

Adding such a command adds no code here.
"""

import inspect
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from app.audit import AuditNote
from app.catalogue import COMMANDS, Command
from app.command_bodies import body_model
from app.deps import Note, Poller, Router
from app.errors import ApiException, error_responses
from app.models import ApiError, OperationTimedOut
from app.replies import answer_of, response_model_of, summary_of
from app.routers.binding import bind
from router_core.control.replies import OperationOutcome

__all__ = ["SERVED", "router"]

router = APIRouter(tags=["operations"])

#: The commands served here: the router's mutations.
SERVED: tuple[Command, ...] = tuple(
    entry for entry in COMMANDS if entry.mutates and entry.served_by == "tokenizer_router"
)


def _responses(entry: Command) -> dict[int | str, dict[str, Any]]:
    statuses = [400, 401, 403, 409, 503]
    if any(argument.place == "path" for argument in entry.arguments):
        statuses.append(404)
    responses = error_responses(*sorted(statuses))
    if entry.engine is not None:
        responses.update(error_responses(502, 504))
    if entry.barrier:
        responses[504] = {
            "model": OperationTimedOut,
            "description": "timeout: not every participant acknowledged in time",
        }
    return responses


def _arguments(entry: Command, body: Any, path: dict[str, Any]) -> msgspec.Struct:
    data = {} if body is None else body.model_dump()
    data.update(path)
    data.update(entry.route.fixed)
    try:
        args: msgspec.Struct = msgspec.convert(data, entry.args_type)
    except msgspec.ValidationError as exc:
        raise ApiException(400, "bad_request", str(exc)) from None
    return args


def _timed_out(entry: Command, args: msgspec.Struct, outcome: OperationOutcome) -> JSONResponse:
    waited = getattr(args, "timeout_s", None)
    within = "" if waited is None else f" within {waited:g} s"
    message = f"{entry.name} not acknowledged{within} by: {', '.join(outcome.stragglers)}"
    answer = answer_of(outcome)
    body = OperationTimedOut(**answer.model_dump(), error=ApiError(code="timeout", message=message))
    return JSONResponse(body.model_dump(), status_code=504)


async def _run(
    entry: Command, note: AuditNote, control: Any, poller: Any, args: msgspec.Struct
) -> Any:
    told = " ".join(f"{name}={getattr(args, name)}" for name in entry.audit)
    note.detail = told or None
    try:
        reply = await control.call(entry, args, by=note.who)
    finally:
        poller.wake()  # the change shows in the event stream without waiting a poll
    note.detail = " ".join(part for part in (told, summary_of(reply)) if part) or None
    if isinstance(reply, OperationOutcome) and entry.barrier and not reply.complete:
        return _timed_out(entry, args, reply)
    return answer_of(reply)


def _serve(entry: Command, path: str) -> None:
    lenient = path != entry.path
    model = body_model(entry, lenient=lenient) if entry.body_arguments() else None

    async def handler(request: Request, note: Note, control: Router, poller: Poller, **kw: Any):  # type: ignore[no-untyped-def]
        # No body is the body of defaults the API offers (a barrier's 5 s timeout).
        body = kw.get("body") or (model() if model is not None else None)
        args = _arguments(entry, body, dict(request.path_params))
        return await _run(entry, note, control, poller, args)

    parameters = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
        for name, annotation in (
            ("request", Request),
            ("note", Note),
            ("control", Router),
            ("poller", Poller),
        )
    ]
    parameters += [
        inspect.Parameter(argument.name, inspect.Parameter.KEYWORD_ONLY, annotation=str)
        for argument in entry.arguments
        if argument.place == "path"
    ]
    if model is not None:
        parameters.append(
            inspect.Parameter(
                "body",
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[model | None, Body()],
                default=None,
            )
        )
    handler.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    handler.__name__ = entry.name if not lenient else f"{entry.name}_{path.strip('/')}"
    handler.__doc__ = f"{entry.summary[0].upper()}{entry.summary[1:]}." + (
        f" SGLang's name for ``{entry.method} {entry.path}``; fields it does not take are ignored."
        if lenient
        else ""
    )
    bind(
        router,
        entry,
        path=path,
        response_model=response_model_of(entry.reply_type),
        responses=_responses(entry),
    )(handler)


for _entry in SERVED:
    for _path in _entry.paths:
        _serve(_entry, _path)
