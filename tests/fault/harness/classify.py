"""What became of one request, as its client saw it: the four outcomes of the fault suite.

Pure: :func:`classify` turns what a client observed (:class:`Observed`) and what the
built-in engine would have generated into a :class:`Verdict`:

* ``ok``: a 200 stream that ended with ``data: [DONE]``, finished by length, with exactly
  the predicted text (and, natively, the predicted number of tokens);
* ``clear error``: the client can tell that it failed: an error status, an ``error``
  event, a finish reason ``abort``, or a connection that broke (refused, reset, a stream
  cut short). The verdict's ``cause`` says which, with the message the stack gave;
* ``wrong text``: the stream ended as a success would (``[DONE]``, or a clean end of the
  body, with no error and no abort) but its text, token count or finish reason is not
  the predicted one: the failure a client cannot see;
* ``hung``: no end within the stated bound.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Observed", "Outcome", "Verdict", "classify"]


class Outcome(enum.Enum):
    """The four outcomes, in the order the figures list them."""

    OK = "ok"
    CLEAR_ERROR = "clear error"
    WRONG_TEXT = "wrong text"
    HUNG = "hung"


@dataclass
class Observed:
    """What one streaming client saw, filled in while the response arrives."""

    status: int | None = None
    #: The final text: the last event's ``text`` (``/generate``, cumulative) or every
    #: chunk's text joined (``/v1/completions``, deltas).
    text: str = ""
    #: The last finish reason seen (a dict natively, a string in ``/v1``), None if none.
    finish: Any = None
    completion_tokens: int | None = None
    events: int = 0
    done: bool = False
    #: The message of an error status or ``error`` event.
    error: str | None = None
    #: A transport failure (``httpx`` exception) as ``Class: message``.
    broken: str | None = None
    timed_out: bool = False
    malformed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    #: Why: the error's message, what differs, or ``""`` for ok.
    cause: str = ""


def _is_abort(finish: Any) -> bool:
    if isinstance(finish, dict):
        return bool(finish.get("type") == "abort")
    return bool(finish == "abort")


def _abort_cause(finish: Any) -> str:
    message = finish.get("message") if isinstance(finish, dict) else None
    return f"abort: {message}" if message else "abort (no message)"


def _finished_by_length(finish: Any, tokens: int) -> bool:
    if isinstance(finish, dict):
        return bool(finish.get("type") == "length" and finish.get("length") == tokens)
    return bool(finish == "length")


def _short(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"...({len(text)} chars)"


def classify(seen: Observed, text: str, tokens: int) -> Verdict:
    """The outcome of a request that should have generated ``text`` (``tokens`` tokens)."""
    if seen.timed_out:
        return Verdict(Outcome.HUNG, f"no end within the bound ({seen.events} events seen)")
    if seen.status is not None and seen.status != 200:
        return Verdict(Outcome.CLEAR_ERROR, f"status {seen.status}: {seen.error or 'no message'}")
    if seen.error is not None:
        return Verdict(Outcome.CLEAR_ERROR, f"error event: {seen.error}")
    if _is_abort(seen.finish):
        return Verdict(Outcome.CLEAR_ERROR, _abort_cause(seen.finish))
    if seen.broken is not None:
        return Verdict(Outcome.CLEAR_ERROR, f"connection: {seen.broken}")
    problems = []
    if seen.malformed:
        problems.append(f"malformed lines {seen.malformed[:2]}")
    if not seen.done:
        problems.append("ended without [DONE]")
    if seen.text != text:
        problems.append(f"text {_short(seen.text)}, predicted {_short(text)}")
    if not _finished_by_length(seen.finish, tokens):
        problems.append(f"finish {seen.finish!r}, predicted length {tokens}")
    if seen.completion_tokens is not None and seen.completion_tokens != tokens:
        problems.append(f"completion_tokens {seen.completion_tokens}, predicted {tokens}")
    if problems:
        return Verdict(Outcome.WRONG_TEXT, "; ".join(problems))
    return Verdict(Outcome.OK)
