"""The sandbox chat templates run in: transformers' sandbox, with every unbounded
construct charged to the current :class:`~switchboard.text.template_bounds.RenderBudget`.

:class:`BoundedSandbox` is jinja2's ``ImmutableSandboxedEnvironment`` (what transformers
renders chat templates in: no attribute starting with ``_``, no mutating ``list.append``
or ``dict.update``) with these hooks, each of which also checks the deadline:

- **loops**: the parsed template is rewritten so that every ``{% for %}`` iterates
  through :meth:`BoundedSandbox.count_iterations`, and ``range`` refuses more items than
  the iterations left (beside jinja2's own cap of 100,000);
- **calls**: every call from the template (a macro, a method, a recursive loop's
  ``loop()``) counts towards the call depth while it runs, and what it returns is
  size-checked; string methods that can grow a string (``center``, ``replace``,
  ``join``, ``format``...) are refused before they run when their result would be too
  long;
- **operators**: ``+``, ``*`` and ``%`` on strings and lists are refused before they make
  a value too long, ``*`` and ``**`` on integers one of too many bits;
- **concatenation** (``~``) and **output** (``{{ value }}``): a list or mapping is turned
  into text only when that text would not be too long, and the result is checked;
- **filters**: each filter is wrapped to check its result, and the ones that take a size
  (``center``, ``indent``, ``wordwrap``, ``batch``...) or grow a string (``replace``,
  ``join``, ``format``) are checked before they run.

Outside a render (no current budget) the hooks check nothing.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from jinja2 import nodes, pass_context
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from switchboard.text.template_bounds import (
    RenderBudget,
    current_budget,
    format_size,
    joined_size,
    percent_size,
    replaced_size,
    text_size,
    unit_of,
)

__all__ = ["BoundedSandbox"]

#: An estimate of a call's result length from its arguments (the string first).
Estimate = Callable[..., int]


def _padded(text: str, width: int, *_fill: Any) -> int:
    return max(len(text), width)


def _expanded(text: str, tabsize: int = 8) -> int:
    return len(text) * max(tabsize, 1)


def _translated(text: str, table: Any) -> int:
    values = table.values() if isinstance(table, Mapping) else ()
    longest = max((len(value) for value in values if isinstance(value, str)), default=1)
    return len(text) * max(longest, 1)


#: String methods whose result may be much longer than the string.
_STR_METHODS: dict[str, Callable[[RenderBudget, str, tuple[Any, ...], dict[str, Any]], int]] = {
    "center": lambda _b, text, args, kwargs: _padded(text, *args, **kwargs),
    "ljust": lambda _b, text, args, kwargs: _padded(text, *args, **kwargs),
    "rjust": lambda _b, text, args, kwargs: _padded(text, *args, **kwargs),
    "zfill": lambda _b, text, args, kwargs: _padded(text, *args, **kwargs),
    "expandtabs": lambda _b, text, args, kwargs: _expanded(text, *args, **kwargs),
    "replace": lambda _b, text, args, kwargs: replaced_size(text, *args, **kwargs),
    "translate": lambda _b, text, args, kwargs: _translated(text, *args, **kwargs),
    "join": lambda b, text, args, _kwargs: joined_size(text, args[0], b.bounds.max_output_chars),
}


def _indented(value: Any, width: Any = 4, *_flags: Any, **_kwargs: Any) -> int:
    text = str(value)
    step: int = width if isinstance(width, int) else len(str(width))
    return len(text) + (text.count("\n") + 1) * step


def _wrapped(value: Any, width: int = 79, *args: Any, **kwargs: Any) -> int:
    wrap = kwargs.get("wrapstring") or (args[1] if len(args) > 1 else None) or "\n"
    text = str(value)
    return len(text) + (len(text) // max(width, 1) + 1) * len(str(wrap))


#: Filters whose result may be much longer than their value, by an estimate from the
#: value and the arguments (the budget gives the estimate its limit).
_FILTER_SIZES: dict[str, Callable[[RenderBudget, Any, tuple[Any, ...], dict[str, Any]], int]] = {
    "replace": lambda _b, value, args, kwargs: replaced_size(str(value), *args, **kwargs),
    "join": lambda b, value, args, _kw: joined_size(
        str(args[0]) if args else "", value, b.bounds.max_output_chars
    ),
    "format": lambda b, value, args, kwargs: percent_size(
        str(value), kwargs or args, b.bounds.max_output_chars
    ),
    "indent": lambda _b, value, args, kwargs: _indented(value, *args, **kwargs),
    "wordwrap": lambda _b, value, args, kwargs: _wrapped(value, *args, **kwargs),
}
#: Filters taking a size (a width, a count, an indent): it may not exceed the limit.
_SIZE_ARGUMENTS = frozenset({"center", "indent", "wordwrap", "batch", "slice", "tojson"})
#: Filters that turn a list or mapping into text (``str``) as a whole.
_STRINGIFYING = frozenset(
    {"string", "join", "pprint", "format", "center", "indent", "wordwrap", "truncate"}
    | {"replace", "trim", "upper", "lower", "title", "capitalize", "striptags", "e"}
    | {"escape", "forceescape", "urlencode", "wordcount", "reverse"}
)


def _estimate(estimate: Callable[..., int], *args: Any) -> int:
    """``estimate(*args)``, or 0 for arguments the operation itself will refuse."""
    try:
        return estimate(*args)
    except (TypeError, ValueError, AttributeError, IndexError):
        return 0


def _check_sizes(budget: RenderBudget, args: Iterable[Any], what: str) -> None:
    for value in args:
        if isinstance(value, int) and not isinstance(value, bool):
            budget.check_size(abs(value), what)


def _check_text(budget: RenderBudget, value: Any, what: str) -> None:
    """Refuse turning ``value`` into text when that text would be too long."""
    if not isinstance(value, str | int | float | type(None)):
        limit = budget.bounds.max_output_chars
        budget.check_size(text_size(value, limit), what)


def _passed(function: Callable[..., Any]) -> Callable[[Context], tuple[Any, ...]]:
    """What jinja2 passes ``function`` before its value: the context, the evaluation
    context or the environment, as it is marked, or nothing."""
    kind = getattr(getattr(function, "jinja_pass_arg", None), "name", None)
    if kind == "context":
        return lambda context: (context,)
    if kind == "eval_context":
        return lambda context: (context.eval_ctx,)
    if kind == "environment":
        return lambda context: (context.environment,)
    return lambda _context: ()


def _guarded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (the filter ``name``), checked against the current budget.

    The guard takes the context (it is marked ``pass_context``) and gives ``function``
    what it asked for. Being marked so also stops jinja2 from calling a filter on
    constants while compiling, where no budget holds (``'%1000000000s' | format('a')``).
    """
    passed = _passed(function)
    size_of = _FILTER_SIZES.get(name)
    what = f"a value (the {name} filter)"

    @pass_context
    @functools.wraps(function, updated=())
    def guarded(context: Context, value: Any, *rest: Any, **kwargs: Any) -> Any:
        budget = current_budget()
        if budget is not None:
            budget.check_time()
            if name in _SIZE_ARGUMENTS:
                _check_sizes(budget, (*rest, *kwargs.values()), what)
            if name in _STRINGIFYING:
                _check_text(budget, value, what)
            if size_of is not None:
                budget.check_size(_estimate(size_of, budget, value, rest, kwargs), what)
        result = function(*passed(context), value, *rest, **kwargs)
        if budget is not None:
            budget.check_value(result, what)
        return result

    return guarded


def _bounded_range(*args: int) -> range:
    """jinja2's sandboxed ``range``, no longer than the loop iterations left."""
    span = safe_range(*args)
    budget = current_budget()
    if budget is not None:
        budget.check_range(len(span))
    return span


@pass_context
def _checked_output(_context: Context, value: Any) -> Any:
    """The ``finalize`` of every ``{{ value }}``: ``value``, unless its text is too long.
    Taking the context keeps jinja2 from evaluating outputs while compiling."""
    budget = current_budget()
    if budget is not None:
        _check_text(budget, value, "an output value")
    return value


def _check_binop(budget: RenderBudget, operator: str, left: Any, right: Any) -> None:
    """Refuse ``left <operator> right`` when its result would be too large."""
    sequences = (str, bytes, list, tuple)
    if operator == "+" and isinstance(left, sequences) and isinstance(right, sequences):
        budget.check_size(len(left) + len(right), "a value (+)", unit_of(left))
    elif operator == "*":
        if isinstance(left, int) and isinstance(right, int):
            budget.check_int_bits(abs(left).bit_length() + abs(right).bit_length())
        elif isinstance(left, sequences) and isinstance(right, int):
            budget.check_size(len(left) * right, "a value (*)", unit_of(left))
        elif isinstance(left, int) and isinstance(right, sequences):
            budget.check_size(left * len(right), "a value (*)", unit_of(right))
    elif operator == "**" and isinstance(left, int) and isinstance(right, int):
        if right > 0 and abs(left) > 1:
            budget.check_int_bits((abs(left).bit_length() - 1) * right + 1)
    elif operator == "%" and isinstance(left, str):
        limit = budget.bounds.max_output_chars
        budget.check_size(_estimate(percent_size, left, right, limit), "a string (%)")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """transformers' sandbox, bounded (see the module docstring).

    ``filters`` and ``template_globals`` are added to jinja2's (the filters before all
    are wrapped);
    the other keywords are jinja2's ``Environment`` options.
    """

    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def __init__(
        self,
        *,
        filters: Mapping[str, Callable[..., Any]] | None = None,
        template_globals: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(finalize=_checked_output, **options)
        self.filters.update(filters or {})
        self.filters = {name: _guarded_filter(name, f) for name, f in self.filters.items()}
        # lipsum makes text of any length from two numbers, and no chat template uses it.
        self.globals.pop("lipsum", None)
        self.globals.update(template_globals or {})
        self.globals["range"] = _bounded_range

    def count_iterations(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """``iterable``'s items, each counted as an iteration of the current render."""
        budget = current_budget()
        if budget is None:
            yield from iterable
            return
        for item in iterable:
            budget.iterate()
            yield item

    def checked_text(self, value: Any) -> Any:
        """``value``, unless it is a list or mapping whose text would be too long."""
        budget = current_budget()
        if budget is not None:
            _check_text(budget, value, "a string (~)")
        return value

    def checked_value(self, value: Any) -> Any:
        """``value``, unless it is a string or collection past the size limit."""
        budget = current_budget()
        if budget is not None:
            budget.check_value(value, "a string (~)")
        return value

    def _generate(
        self,
        source: nodes.Template,
        name: str | None,
        filename: str | None,
        defer_init: bool = False,
    ) -> str:
        """jinja2's hook between parsing and code generation: route every loop's
        iterable through :meth:`count_iterations` and every ``~`` through the checks."""
        _rewrite(source)
        return super()._generate(source, name, filename, defer_init)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        """The operator, refused first when its result would be too large."""
        budget = current_budget()
        if budget is not None:
            budget.check_time()
            _check_binop(budget, operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(
        # jinja2's parameter names: positional only, so no keyword argument collides.
        __self,
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """The call, counted in the call depth; a string method that would make a string
        too long is refused first, and the result is size-checked."""
        budget = current_budget()
        if budget is None:
            return super().call(__context, __obj, *args, **kwargs)
        _check_call(budget, __obj, args, kwargs)
        budget.enter_call()
        try:
            result = super().call(__context, __obj, *args, **kwargs)
        finally:
            budget.leave_call()
        budget.check_value(result, "a value (a call)")
        return result


def _call(method: str, argument: nodes.Node) -> nodes.Call:
    """A node calling this environment's ``method`` on ``argument``."""
    target = nodes.EnvironmentAttribute(method, lineno=argument.lineno)
    return nodes.Call(target, [argument], [], None, None, lineno=argument.lineno)


def _wrapped_concat(value: Any) -> Any:
    """``value`` (a node field), each ``~`` in it wrapped in the size check."""
    if isinstance(value, nodes.Concat):
        return _call("checked_value", value)
    if isinstance(value, list) and any(isinstance(item, nodes.Concat) for item in value):
        return [_wrapped_concat(item) for item in value]
    return value


def _rewrite(tree: nodes.Template) -> None:
    """Route the loops and concatenations of ``tree`` through the bounded sandbox."""
    # Every node is listed before any changes, so the nodes added are not visited.
    for node in [tree, *tree.find_all(nodes.Node)]:
        for field, value in node.iter_fields():
            setattr(node, field, _wrapped_concat(value))
        if isinstance(node, nodes.Concat):
            node.nodes = [_call("checked_text", operand) for operand in node.nodes]
        elif isinstance(node, nodes.For):
            node.iter = _call("count_iterations", node.iter)


def _check_call(
    budget: RenderBudget, function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Refuse a string method call whose result would be too long."""
    # str.format comes wrapped by the sandbox; the wrapper keeps the method.
    method = getattr(function, "__wrapped__", function)
    owner = getattr(method, "__self__", None)
    if not isinstance(method, types.BuiltinMethodType) or not isinstance(owner, str):
        return
    limit = budget.bounds.max_output_chars
    what = f"a string (str.{method.__name__})"
    if method.__name__ in ("format", "format_map"):
        values = args[0] if method.__name__ == "format_map" and args else kwargs
        positional = args if method.__name__ == "format" else ()
        size = _estimate(format_size, owner, positional, values, limit)
        budget.check_size(size, what)
        return
    size_of = _STR_METHODS.get(method.__name__)
    if size_of is not None:
        budget.check_size(_estimate(size_of, budget, owner, args, kwargs), what)
