"""The one place the admin app reads a request body: as JSON, whatever the Content-Type says.

Every route that takes a body is a :class:`JsonBodyRoute` (:func:`app.routers.binding.bind`
makes them so), which, before FastAPI validates anything, reads the body and decodes it
as JSON with :func:`decode_body`:

* the ``Content-Type`` is not consulted: ``curl -d '{"mode": "in_place"}'``, which says
  ``application/x-www-form-urlencoded``, is read as the JSON it is. (The workers refuse
  such bodies, a CSRF defence for an unauthenticated port; the admin app's mutations
  need an ``Authorization`` header, which no page can make a browser send to another
  origin without a CORS preflight this app never grants, and the token is checked
  before the body is read, by :class:`app.guard.MutationGuard`);
* an empty body, or one of only whitespace, is no body: the route's defaults apply;
* a body that is not JSON is 400 ``bad_request`` saying what is wrong and where
  (``the body is not valid JSON: trailing comma in object at byte 17; send a JSON
  object, such as {"mode":"abort","timeout_s":5.0}``), and a JSON value that is not an
  object (an array, a string) is 400 naming what it is, with the same example;
* what the object holds is FastAPI's to validate (:mod:`app.errors` words its 400s).

Routes without a body (the GETs, drain, undrain, freeze GC) are untouched: a body sent
to one is ignored, as before.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Coroutine
from typing import Any, Final, get_args

import msgspec
from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import ClientDisconnect
from starlette.types import Scope

from app.errors import ApiException, json_kind

__all__ = ["JsonBodyRoute", "decode_body"]

_decoder: Final = msgspec.json.Decoder()
#: How msgspec says where a malformed document goes wrong.
_MALFORMED: Final = re.compile(r"JSON is malformed: (?P<what>.+) \(byte (?P<at>\d+)\)")
#: What msgspec says of a document that ends early, and of a lone surrogate escape.
_TRUNCATED: Final = "Input data was truncated"


def _problem(raw: bytes, error: msgspec.DecodeError) -> str:
    """What is wrong with ``raw``, which msgspec refused with ``error``, in a few words."""
    said = str(error)
    malformed = _MALFORMED.fullmatch(said)
    if malformed is not None:
        return f"{malformed['what']} at byte {malformed['at']}"
    if said == _TRUNCATED:
        # msgspec says the same of a lone surrogate escape ("\ud800"), which Python's
        # decoder takes: only a refused body is decoded again, to tell the two apart.
        try:
            json.loads(raw)
        except (ValueError, RecursionError):
            return f"it ends at byte {len(raw)}, before the JSON value does"
        return "a string holds a lone surrogate escape (such as \\ud800), not Unicode text"
    # Such as "Invalid UTF-8 encoded string", "Number out of range - at `$[...]`".
    said = said.partition(" - at `")[0]
    return said[:1].lower() + said[1:]


def decode_body(raw: bytes, example: str) -> Any:
    """The JSON value of the request body ``raw`` (None for an empty or blank body; a
    UTF-8 byte order mark is skipped); ApiException 400 ``bad_request`` for a body that
    is not JSON, or not a JSON object, the message ending with ``example``, a body that
    would do."""
    data = raw.removeprefix(codecs.BOM_UTF8)
    if not data.strip():
        return None
    try:
        value = _decoder.decode(data)
    except msgspec.DecodeError as error:
        problem = _problem(data, error)
        raise ApiException(
            400, "bad_request", f"the body is not valid JSON: {problem}; {example}"
        ) from error
    except RecursionError as error:
        raise ApiException(
            400, "bad_request", f"the body is not valid JSON: it nests too deeply; {example}"
        ) from error
    if value is not None and not isinstance(value, dict):
        raise ApiException(
            400,
            "bad_request",
            f"the body should be a JSON object, not {json_kind(value)}; {example}",
        )
    return value


def _example(route: APIRoute) -> str:
    """The advice a refused body gets: a body of the route's defaults, as JSON."""
    annotation = route.body_field.field_info.annotation if route.body_field else None
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            try:
                return f"send a JSON object, such as {candidate().model_dump_json()}"
            except ValueError:  # a model with required fields: no body of defaults
                fields = ", ".join(candidate.model_fields)
                return f"send a JSON object with the fields {fields}"
    return "send a JSON object"


def _as_json(scope: Scope) -> Scope:
    """``scope`` declaring its body ``application/json``, so FastAPI reads it as JSON."""
    headers = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
    return {**scope, "headers": [*headers, (b"content-type", b"application/json")]}


class _DecodedRequest(Request):
    """A request whose body :class:`JsonBodyRoute` has decoded: FastAPI's ``json()``
    gets that value instead of decoding the body again."""

    decoded: Any = None

    async def json(self) -> Any:
        return self.decoded


class JsonBodyRoute(APIRoute):
    """An API route whose body, if it takes one, is read as the module docstring says."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler
        example = _example(self)

        async def read_json_body(request: Request) -> Response:
            decoded = _DecodedRequest(_as_json(request.scope), request.receive)
            try:
                raw = await decoded.body()
            except ClientDisconnect as error:
                # Nobody reads this answer; the audit record says why the attempt ended.
                raise ApiException(
                    400, "bad_request", "the client went away before its body arrived"
                ) from error
            decoded.decoded = decode_body(raw, example)
            return await handler(decoded)

        return read_json_body
