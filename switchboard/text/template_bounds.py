"""Bounds on one chat-template render: the limits, one render's use of them, and the
size estimates the sandbox checks before it makes a value.

A chat template is code from the model (or the operator) run on data from the client,
so each render is bounded however the two combine. :class:`TemplateBounds` holds the
limits; :class:`RenderBudget` is one render's use of them, current for the duration of
:func:`render_budget` (a context variable, so concurrent renders in other threads keep
their own). The sandbox (:mod:`switchboard.text.template_sandbox`) charges the current
budget in its hooks; crossing a bound raises :class:`BoundExceeded` naming the
:class:`TemplateBounds` field.

The estimates here say how long a string a formatting operation or string method
would make, from its arguments, so that a value too large is refused before it is made
rather than after it has taken the memory.
"""

from __future__ import annotations

import re
import string
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "BoundExceeded",
    "RenderBudget",
    "TemplateBounds",
    "current_budget",
    "format_size",
    "joined_size",
    "percent_size",
    "render_budget",
    "replaced_size",
    "text_size",
    "unit_of",
]


@dataclass(frozen=True, slots=True)
class TemplateBounds:
    """What one render may use; each limit must be positive."""

    #: Characters of output, and characters (or items) of any one string or list the
    #: template makes on the way.
    max_output_chars: int = 4 * 1024 * 1024
    #: Loop iterations in all, every loop of the render counted (and items of a
    #: ``range``, which may not exceed the iterations left).
    max_iterations: int = 1_000_000
    #: Calls in progress at once: macros calling macros, a recursive loop's ``loop()``.
    max_call_depth: int = 64
    #: Bits of an integer that ``*`` or ``**`` makes.
    max_int_bits: int = 4096
    #: Wall-clock seconds one render may take.
    max_seconds: float = 1.0

    def __post_init__(self) -> None:
        for field in fields(self):
            if not getattr(self, field.name) > 0:
                raise ValueError(f"{field.name} must be positive")


class BoundExceeded(Exception):
    """A render crossed ``bound`` (a :class:`TemplateBounds` field name)."""

    def __init__(self, bound: str, message: str) -> None:
        super().__init__(message)
        self.bound = bound


def unit_of(value: Any) -> str:
    """What the length of ``value`` counts: characters of a string, else items."""
    return "characters" if isinstance(value, str | bytes) else "items"


class RenderBudget:
    """One render's iterations, call depth and output so far, and its deadline."""

    def __init__(
        self, bounds: TemplateBounds, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.bounds = bounds
        self._clock = clock
        self._deadline = clock() + bounds.max_seconds
        self.iterations = 0
        self.depth = 0
        self.output_chars = 0

    def check_time(self) -> None:
        """:class:`BoundExceeded` (``max_seconds``) once the deadline has passed."""
        if self._clock() > self._deadline:
            limit = self.bounds.max_seconds
            message = f"the chat template took more than {limit:g} s to render (max_seconds)"
            raise BoundExceeded("max_seconds", message)

    def iterate(self) -> None:
        """Count one loop iteration."""
        self.iterations += 1
        if self.iterations > self.bounds.max_iterations:
            limit = self.bounds.max_iterations
            message = f"the chat template ran more than {limit} loop iterations (max_iterations)"
            raise BoundExceeded("max_iterations", message)
        self.check_time()

    def check_range(self, length: int) -> None:
        """Refuse a ``range`` longer than the iterations left."""
        left = self.bounds.max_iterations - self.iterations
        if length > left:
            message = (
                f"the chat template asked for a range of {length} items, more than the "
                f"{left} loop iterations left (max_iterations)"
            )
            raise BoundExceeded("max_iterations", message)

    def enter_call(self) -> None:
        """Count a call that starts; :meth:`leave_call` when it returns."""
        if self.depth >= self.bounds.max_call_depth:
            message = (
                f"the chat template nested calls deeper than {self.bounds.max_call_depth} "
                "(max_call_depth): a macro that recurses without end?"
            )
            raise BoundExceeded("max_call_depth", message)
        self.depth += 1
        self.check_time()

    def leave_call(self) -> None:
        """Count a call that returned (or raised)."""
        self.depth -= 1

    def check_size(self, size: int, what: str, unit: str = "characters") -> None:
        """Refuse ``what`` (a value to be made, or just made: ``a string (str.center)``)
        of ``size`` characters or items past ``max_output_chars``."""
        limit = self.bounds.max_output_chars
        if size > limit:
            message = (
                f"the chat template asked for {what} of {size} {unit}, more than "
                f"max_output_chars ({limit})"
            )
            raise BoundExceeded("max_output_chars", message)

    def check_value(self, value: Any, what: str = "a value") -> None:
        """:meth:`check_size` of a string, list, tuple, mapping or set just made."""
        if isinstance(value, str | bytes | list | tuple | dict | set | frozenset):
            self.check_size(len(value), what, unit_of(value))

    def check_int_bits(self, bits: int) -> None:
        """Refuse an integer of ``bits`` bits past ``max_int_bits``."""
        if bits > self.bounds.max_int_bits:
            message = (
                f"the chat template made an integer of more than {self.bounds.max_int_bits} "
                "bits (max_int_bits)"
            )
            raise BoundExceeded("max_int_bits", message)

    def add_output(self, chars: int) -> None:
        """Count ``chars`` characters of output."""
        self.output_chars += chars
        limit = self.bounds.max_output_chars
        if self.output_chars > limit:
            message = f"the chat template's output passed {limit} characters (max_output_chars)"
            raise BoundExceeded("max_output_chars", message)
        self.check_time()

    def join(self, chunks: Iterable[str], what: str) -> str:
        """``"".join(chunks)``, refused as soon as it passes ``max_output_chars``."""
        parts: list[str] = []
        size = 0
        for chunk in chunks:
            size += len(chunk)
            self.check_size(size, what)
            parts.append(chunk)
        return "".join(parts)


_current: ContextVar[RenderBudget | None] = ContextVar("switchboard_render_budget", default=None)


def current_budget() -> RenderBudget | None:
    """The budget of the render in progress in this context, if any."""
    return _current.get()


@contextmanager
def render_budget(
    bounds: TemplateBounds, *, clock: Callable[[], float] = time.monotonic
) -> Iterator[RenderBudget]:
    """A fresh budget for ``bounds``, current until the block ends."""
    budget = RenderBudget(bounds, clock=clock)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def text_size(value: Any, limit: int) -> int:
    """About how many characters ``str(value)`` has, for data made of strings, numbers,
    lists, tuples, sets and mappings; counting stops once past ``limit``, so the cost is
    bounded by ``limit`` however the data nests or repeats itself."""
    size, pending = 0, [value]
    while pending and size <= limit:
        item = pending.pop()
        if isinstance(item, str | bytes):
            size += len(item) + 2
        elif isinstance(item, list | tuple | set | frozenset):
            size += 2 * len(item) + 2
            pending.extend(item)
        elif isinstance(item, Mapping):
            size += 4 * len(item) + 2
            pending.extend(item.keys())
            pending.extend(item.values())
        else:
            size += 8
    return size


#: One ``%`` conversion: mapping key, flags, width, precision, length, type.
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
_DIGITS = re.compile(r"\d+")


def _widths(arguments: Iterable[Any]) -> int:
    """The largest integer among ``arguments`` (a ``*`` width or precision may be any)."""
    ints = [abs(value) for value in arguments if isinstance(value, int)]
    return max(ints, default=0)


def _arguments_size(arguments: Iterable[Any], limit: int) -> int:
    return sum(text_size(value, limit) for value in arguments)


def percent_size(text: str, arguments: Any, limit: int) -> int:
    """An upper estimate of ``len(text % arguments)``."""
    values = list(arguments.values()) if isinstance(arguments, Mapping) else arguments
    values = list(values) if isinstance(values, tuple | list) else [values]
    specs = _PERCENT_SPEC.findall(text)
    widest = max((int(part) for spec in specs for part in spec if part.isdigit()), default=0)
    if any("*" in spec for spec in specs):
        widest = max(widest, _widths(values))
    return len(text) + len(specs) * widest + _arguments_size(values, limit)


def format_size(text: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], limit: int) -> int:
    """An upper estimate of ``len(text.format(*args, **kwargs))``: a width in a format
    spec is a literal number or (nested) one of the arguments."""
    values = [*args, *kwargs.values()]
    widest, nested, fields_count = 0, False, 0
    for _literal, field, spec, _conversion in string.Formatter().parse(text):
        if field is None:
            continue
        fields_count += 1
        widest = max([widest, *(int(digits) for digits in _DIGITS.findall(spec or ""))])
        nested = nested or "{" in (spec or "")
    if nested:
        widest = max(widest, _widths(values))
    return len(text) + fields_count * (widest + _arguments_size(values, limit))


def replaced_size(text: str, old: str, new: str, count: int = -1) -> int:
    """``len(text.replace(old, new, count))``, without making it."""
    found = text.count(old)
    if count >= 0:
        found = min(found, count)
    return len(text) + found * max(0, len(new) - len(old))


def joined_size(separator: str, items: Any, limit: int) -> int:
    """An upper estimate of ``len(separator.join(items))`` for sized ``items``."""
    if not isinstance(items, Sized):
        return 0
    return len(separator) * len(items) + text_size(items, limit)
