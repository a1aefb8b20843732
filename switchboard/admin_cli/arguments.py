"""Every rule the operator commands hold their command line to, in one place.

A flag's value is checked while parsing (an ``argparse`` type below, so a bad one is
``switchboard <command>: error: argument --flag: ...``, exit 2, before any request);
:func:`connection` applies the same rules to the values ``--url`` and ``--token`` fall
back to from the environment. A barrier's timeout is held to the range the router and
the admin API accept (:data:`~router_core.limits.MAX_BARRIER_TIMEOUT_S`), so a value the
server would refuse never leaves the machine.

Importing this module costs the standard library, :mod:`router_core.limits`,
:mod:`router_core.identifiers` and :mod:`switchboard.argtypes` only;
checking a URL loads httpx, which the commands load anyway.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from router_core.identifiers import check_worker_id
from router_core.limits import MAX_BARRIER_TIMEOUT_S
from switchboard.argtypes import finite_float

__all__ = [
    "DEFAULT_URL",
    "MAX_BARRIER_TIMEOUT_S",
    "TOKEN_ENV",
    "URL_ENV",
    "Connection",
    "barrier_timeout",
    "connection",
    "http_timeout",
    "token",
    "token_problem",
    "url",
    "url_problem",
    "watch_interval",
    "worker_id",
]

DEFAULT_URL: Final = "http://127.0.0.1:8001"
#: The variables ``--url`` and ``--token`` fall back to (an empty one counts as unset).
URL_ENV: Final = "SWITCHBOARD_ADMIN_URL"
TOKEN_ENV: Final = "SWITCHBOARD_ADMIN_TOKEN"  # noqa: S105 (a variable name, not a secret)
#: The bytes a bearer token may hold (RFC 6750 b64token, and every other visible ASCII).
_TOKEN_CHARS: Final = frozenset(chr(code) for code in range(0x21, 0x7F))


def barrier_timeout(text: str) -> float:
    """A pause's or continue's ``timeout_s``: ``0 < S <= 600`` seconds, the admin API's
    range (the router's as well)."""
    value = finite_float(text, expected="seconds")
    if not 0 < value <= MAX_BARRIER_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and at most {MAX_BARRIER_TIMEOUT_S:g} seconds (the admin "
            f"API's range), got {text}"
        )
    return value


def watch_interval(text: str) -> float:
    """``--watch``'s seconds between two showings: at least 0.5 and at most an hour."""
    value = finite_float(text, expected="seconds")
    if not 0.5 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 0.5 to 3600 seconds, got {text}")
    return value


def wait_seconds(text: str) -> float:
    """``drain --wait``'s longest wait: more than 0 and at most a day."""
    value = finite_float(text, expected="seconds")
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and at most 86400 seconds, got {text}"
        )
    return value


def http_timeout(text: str) -> float:
    """How long a command waits for the admin app's answer: any ``S > 0`` seconds."""
    value = finite_float(text, expected="seconds")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def worker_id(text: str) -> str:
    """A ``drain``/``undrain`` ID: a worker id as the router accepts one
    (:func:`router_core.identifiers.check_worker_id`), so no id that cannot exist is sent."""
    try:
        return check_worker_id(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("worker id ")) from None


def token_problem(given: str) -> str | None:
    """Why ``given`` cannot be sent as a bearer token, or None (never repeats it)."""
    if not given:
        return "is empty"
    if not set(given) <= _TOKEN_CHARS:
        return "holds spaces or characters an HTTP header cannot carry"
    return None


def token(text: str) -> str:
    """``--token``: a token a header can carry. Empty is refused: an explicit empty value
    never quietly means "use SWITCHBOARD_ADMIN_TOKEN" (leave the flag out for that)."""
    problem = token_problem(text)
    if problem == "is empty":
        raise argparse.ArgumentTypeError(
            f"is empty; give a token, or leave --token out to use {TOKEN_ENV}"
        )
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def url_problem(given: str) -> str | None:
    """Why ``given`` is not ``http(s)://host[:port][/prefix]``, or None."""
    import httpx

    if not given:
        return "is empty"
    try:
        parsed = httpx.URL(given)
    except httpx.InvalidURL as exc:
        return str(exc)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return "expected http://HOST:PORT or https://HOST:PORT"
    if parsed.query or parsed.fragment:
        return "no query or fragment, please"
    return None


def url(text: str) -> str:
    """``--url``: the admin app's ``http(s)://host[:port][/prefix]``, without a trailing
    slash. Empty is refused (leave the flag out to use SWITCHBOARD_ADMIN_URL)."""
    problem = url_problem(text)
    if problem == "is empty":
        raise argparse.ArgumentTypeError(
            f"is empty; give the admin app's URL, or leave --url out to use {URL_ENV} "
            f"(else {DEFAULT_URL})"
        )
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text.rstrip("/")


@dataclass(frozen=True)
class Connection:
    """Where a command sends its request and the token it sends (None: none)."""

    url: str
    token: str | None


def connection(
    given_url: str | None, given_token: str | None, environ: Mapping[str, str]
) -> Connection:
    """``--url`` and ``--token`` as parsed (None: not given), else their variables in
    ``environ`` (empty: unset), else the default URL and no token.

    A variable's value is held to its flag's rules; :class:`ValueError` naming the
    variable (never the token) when it breaks one.
    """
    chosen_url = given_url
    if chosen_url is None:
        chosen_url = environ.get(URL_ENV) or DEFAULT_URL
        problem = url_problem(chosen_url)
        if problem is not None:
            raise ValueError(f"{URL_ENV}={chosen_url!r}: {problem}")
        chosen_url = chosen_url.rstrip("/")
    chosen_token = given_token
    if chosen_token is None:
        chosen_token = environ.get(TOKEN_ENV) or None
        problem = None if chosen_token is None else token_problem(chosen_token)
        if problem is not None:
            raise ValueError(f"{TOKEN_ENV} {problem}")
    return Connection(chosen_url, chosen_token)
