"""The one seam where a worker reads a request body: JSON content types only, decoded once.

Every route that takes a body is a :class:`JsonBodyRoute`, which, before FastAPI parses
anything:

* refuses (415, :class:`UnsupportedMediaType`) a body not declared as JSON: the
  ``Content-Type`` must be ``application/json`` or ``application/<something>+json``
  (parameters such as ``charset`` allowed). A form, ``text/plain`` or a missing type is
  refused, because those are what a web page can make a browser send to a local port
  without asking first (a CORS "simple" request). The worker setting
  ``accept_any_content_type`` reads any body as JSON instead, for old clients;
* decodes the body with :func:`decode_json_body`, refusing (400, :class:`InvalidBody`)
  anything that is not UTF-8 JSON of Unicode text: a string or a key holding a lone
  surrogate (``"\\ud800"``) anywhere, however deep, is refused naming where it is, so
  no handler, tokenizer or encoder downstream ever sees one.

Then it validates the body under the worker's unknown-field policy
(:func:`~switchboard.worker.body_base.unknown_fields_policy`, from the setting
``reject_unknown_fields``) and hands what was ignored to the app's
``state.ignored_fields`` (:class:`~switchboard.worker.ignored_fields.IgnoredFields`).

Routes without a body (the GETs) are untouched.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

import msgspec
from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect
from starlette.types import Scope

from switchboard.worker.body_base import unknown_fields_policy
from switchboard.worker.disconnect import ClientDisconnected

__all__ = [
    "BodyRefused",
    "InvalidBody",
    "InvalidUnicode",
    "JsonBodyRoute",
    "UnsupportedMediaType",
    "decode_json_body",
    "invalid_string_at",
    "is_json_media_type",
    "refuse_unless_json",
]

#: Where a value is in a JSON document: object keys and list indices, outermost first.
JsonPath = tuple[str | int, ...]
#: Types of decoded JSON values that hold no text, and those that may hold more values.
_TEXTLESS = frozenset({int, float, bool, type(None)})
_CONTAINERS = (list, dict)

#: The fix a 415 names.
SEND_JSON = "send the body as JSON with the header Content-Type: application/json"

_decoder = msgspec.json.Decoder()


class BodyRefused(Exception):
    """A body refused before validation: its status, the ``http_rejected`` reason it is
    counted under, and the field (``param``) it names, if any."""

    status = 400
    reason = "invalid_request"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class UnsupportedMediaType(BodyRefused):
    """The body is not declared as JSON (415)."""

    status = 415
    reason = "unsupported_media_type"


class InvalidBody(BodyRefused):
    """The body is not JSON: malformed, or too deeply nested (400)."""


class InvalidUnicode(InvalidBody):
    """The body is not Unicode text: not UTF-8, or a string with a lone surrogate (400)."""

    reason = "invalid_unicode"


def is_json_media_type(content_type: str) -> bool:
    """Whether the ``Content-Type`` value ``content_type`` declares JSON:
    ``application/json`` or ``application/*+json``, any parameters, any case."""
    media_type = content_type.partition(";")[0].strip().lower()
    kind, slash, subtype = media_type.partition("/")
    suffixed = subtype.endswith("+json") and len(subtype) > len("+json")
    return kind == "application" and bool(slash) and (subtype == "json" or suffixed)


def _escaped(text: str) -> str:
    """``text`` with what cannot be encoded (lone surrogates) shown as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _lone_surrogate(text: str) -> int | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def _dotted(path: JsonPath) -> str:
    return ".".join(str(part) for part in path)


def _surrogate(text: str, at: int) -> str:
    return f"a lone surrogate \\u{ord(text[at]):04x} at character {at}"


def invalid_string_at(value: Any) -> tuple[JsonPath, str | None, str] | None:
    """A string or object key in the decoded JSON ``value`` that is not Unicode text (it
    holds a lone surrogate): ``(path, key, problem)``, where ``path`` (keys and list
    indices) leads to the string, or to the object holding the bad ``key`` (None for a
    string); None when every string is text.

    Iterative, so any depth the decoder took is fine, and quick on what cannot hold text:
    a list without strings or containers (token ids) is skipped in C."""
    pending: list[tuple[JsonPath, Any]] = [((), value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            at = _lone_surrogate(item)
            if at is not None:
                return path, None, _surrogate(item, at)
        elif isinstance(item, dict):
            for key, child in item.items():
                at = _lone_surrogate(key)
                if at is not None:
                    return path, key, _surrogate(key, at)
                if isinstance(child, (str, *_CONTAINERS)):
                    pending.append(((*path, key), child))
        elif isinstance(item, list) and not _TEXTLESS.issuperset(map(type, item)):
            for index, child in enumerate(item):
                if isinstance(child, str):
                    at = _lone_surrogate(child)
                    if at is not None:
                        return (*path, index), None, _surrogate(child, at)
                elif isinstance(child, _CONTAINERS):
                    pending.append(((*path, index), child))
    return None


_ADVICE = "JSON strings must be Unicode text (a surrogate pair, or the character, is fine)"
#: A refused body up to this size is decoded again to name the bad string's field; a
#: larger one is only scanned (in C) for where it is, so explaining stays cheap.
EXPLAIN_BYTES = 1 << 20
#: The longest prefix of a JSON text without a lone surrogate escape: text without
#: backslashes, other escapes (``\\`` taken whole, so an escaped backslash never starts
#: one), escapes of non-surrogates, and surrogate pairs.
_LONE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_NO_LONE_ESCAPE = re.compile(
    rb"(?:[^\\]++|\\[^u]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4}"
    rb"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})*+"
)


def _not_text(found: tuple[JsonPath, str | None, str]) -> InvalidUnicode:
    path, key, problem = found
    if key is None:
        where = _dotted(path) or "body"
        return InvalidUnicode(
            f"{where}: not valid Unicode: {problem}; {_ADVICE}",
            param=str(path[0]) if path else None,
        )
    holder = f"of {_dotted(path)}" if path else "of the body"
    return InvalidUnicode(
        f'a key {holder} ("{_escaped(key)}") is not valid Unicode: {problem}; {_ADVICE}',
        param=str(path[0]) if path else _escaped(key),
    )


def _located(raw: bytes, error: msgspec.DecodeError) -> BodyRefused:
    """What is wrong with the large refused body ``raw``, found by scans in C: where its
    first lone surrogate is (as bytes, or escaped), not which field holds it."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        at = bad.start
        if raw[at] == 0xED and b"\xa0" <= raw[at + 1 : at + 2] <= b"\xbf":
            return InvalidUnicode(
                f"not valid Unicode: a lone surrogate (as UTF-8 bytes) at byte {at} of the "
                f"body; {_ADVICE}"
            )
        return InvalidUnicode(f"the body is not valid UTF-8 (byte {at})")
    prefix = _NO_LONE_ESCAPE.match(raw)
    assert prefix is not None  # the pattern matches the empty string
    at = prefix.end()
    escape = raw[at : at + 6].decode("ascii", "replace")
    if _LONE_ESCAPE.fullmatch(escape):
        return InvalidUnicode(
            f"not valid Unicode: a lone surrogate {escape} at byte {at} of the body; {_ADVICE}"
        )
    return InvalidBody(f"the body is not valid JSON: {error}")


def _explain(raw: bytes, error: msgspec.DecodeError) -> BodyRefused:
    """What is wrong with a body the fast decoder refused; only refused bodies get here.

    The fast decoder does not say where a bad string is, so a body of at most
    :data:`EXPLAIN_BYTES` is decoded again, permissively (lone surrogates kept), to name
    the field; a larger one is :func:`_located`."""
    if len(raw) > EXPLAIN_BYTES:
        return _located(raw, error)
    try:
        text = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as bad:
        return InvalidUnicode(f"the body is not valid UTF-8 (byte {bad.start})")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as bad:
        return InvalidBody(f"the body is not valid JSON: {bad}")
    except RecursionError:
        return InvalidBody("the body is not valid JSON: it nests too deeply")
    found = invalid_string_at(value)
    if found is None:  # JSON only Python reads: NaN, Infinity, a number out of range
        return InvalidBody(f"the body is not valid JSON: {error}")
    return _not_text(found)


def decode_json_body(raw: bytes) -> Any:
    """The JSON value of the body ``raw`` (UTF-8; a leading byte order mark is skipped).

    Raises :class:`InvalidBody` (malformed JSON, nesting past the interpreter's limit)
    or :class:`InvalidUnicode` (not UTF-8, or a string or key anywhere holding a lone
    surrogate, the message naming its path). The decoder refuses such strings itself,
    in C, so a good body is read once and never walked in Python.
    """
    data: bytes | memoryview = raw
    if raw.startswith(codecs.BOM_UTF8):
        data = memoryview(raw)[len(codecs.BOM_UTF8) :]
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as error:
        raise _explain(bytes(data), error) from error
    except RecursionError as error:
        raise InvalidBody("the body is not valid JSON: it nests too deeply") from error


class _DecodedRequest(Request):
    """A request whose JSON body :class:`JsonBodyRoute` decoded already."""

    decoded: Any = None

    async def json(self) -> Any:
        return self.decoded


def _as_json(scope: Scope) -> Scope:
    """``scope`` with its content type replaced by ``application/json``."""
    headers = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
    return {**scope, "headers": [*headers, (b"content-type", b"application/json")]}


def refuse_unless_json(scope: Scope) -> None:
    """Raise :class:`UnsupportedMediaType` unless the request declares exactly one JSON
    content type."""
    declared = [value for name, value in scope["headers"] if name == b"content-type"]
    if not declared:
        raise UnsupportedMediaType(f"the request has no Content-Type; {SEND_JSON}")
    if len(declared) > 1:
        raise UnsupportedMediaType(f"the request has {len(declared)} Content-Types; {SEND_JSON}")
    shown = declared[0].decode("latin-1")
    if not is_json_media_type(shown):
        raise UnsupportedMediaType(
            f"the body is declared as {shown[:100]!r}, not JSON; {SEND_JSON}"
        )


class JsonBodyRoute(APIRoute):
    """An API route whose body, if it takes one, is checked and decoded as the module
    docstring says before FastAPI validates it. Whether any content type is read as
    JSON is the app's ``state.settings.accept_any_content_type``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler
        path = self.path

        async def json_body_handler(request: Request) -> Response:
            scope = request.scope
            if request.app.state.settings.accept_any_content_type:
                scope = _as_json(scope)
            else:
                refuse_unless_json(scope)
            decoded = _DecodedRequest(scope, request.receive)
            try:
                raw = await decoded.body()
            except ClientDisconnect as error:
                raise ClientDisconnected from error
            if raw:  # an empty body is FastAPI's to refuse (a missing field)
                decoded.decoded = decode_json_body(raw)
            state = request.app.state
            with unknown_fields_policy(reject=state.settings.reject_unknown_fields) as policy:
                try:
                    return await handler(decoded)
                finally:
                    if policy.ignored:
                        state.ignored_fields.report(path, policy.ignored)

        return json_body_handler
