"""Every bound on a chat-template render (switchboard.text.template_bounds and
template_sandbox) stops a template that would loop, recurse or grow without end, with a
ChatTemplateError naming the bound, well within a second; templates within the bounds
render as before."""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

from switchboard.text.chat_template import ChatTemplate, ChatTemplateError, TemplateBounds
from switchboard.text.template_bounds import RenderBudget, text_size

#: Small limits, so that crossing each is quick.
SMALL = TemplateBounds(
    max_output_chars=10_000, max_iterations=5_000, max_call_depth=20, max_int_bits=256
)


def crossed(source: str, bounds: TemplateBounds = SMALL, **extra: Any) -> ChatTemplateError:
    """The error rendering ``source`` raises, checked to come (compiling included) within
    half a second of this thread's CPU time."""
    # CPU time of this thread, after a collection: the claim is what the render costs, and
    # on a loaded 2-core CI machine wall time also counts other processes and a full
    # collection of the whole suite's heap (0.6 s once, for a 5 ms render).
    gc.collect()
    started = time.thread_time()
    template = ChatTemplate(source, bounds=bounds)
    with pytest.raises(ChatTemplateError) as caught:
        template.render([{"role": "user", "content": "Hi"}], extra=extra)
    assert time.thread_time() - started < 0.5
    return caught.value


def rendered(source: str, bounds: TemplateBounds = SMALL, **extra: Any) -> str:
    return ChatTemplate(source, bounds=bounds).render([], extra=extra)


class TestIterations:
    """max_iterations counts every loop's iterations, and caps ranges."""

    def test_nested_loops(self) -> None:
        """Two nested loops of 100 x 100 pass 5,000 iterations (each alone is fine)."""
        source = "{% for i in range(100) %}{% for j in items %}{% endfor %}{% endfor %}"
        error = crossed(source, items=list(range(100)))
        assert error.bound == "max_iterations"
        assert str(error) == "the chat template ran more than 5000 loop iterations (max_iterations)"

    def test_loop_over_data(self) -> None:
        """A loop over a list counts like one over a range."""
        source = "{% for a in items %}{% for b in items %}{% endfor %}{% endfor %}"
        error = crossed(source, items=list(range(80)))
        assert error.bound == "max_iterations"

    def test_range_size(self) -> None:
        """A range longer than the iterations left is refused before it is iterated."""
        error = crossed("{% for i in range(10) %}{% endfor %}{{ range(4991) | list }}")
        assert error.bound == "max_iterations"
        assert "a range of 4991 items, more than the 4990 loop iterations left" in str(error)

    def test_within_the_bound(self) -> None:
        """5,000 iterations, loop variables and all, render."""
        source = (
            "{% for i in range(50) %}{% for j in range(99) %}{% endfor %}"
            "{{ loop.last }}{% endfor %}"
        )
        assert rendered(source).endswith("FalseTrue")


class TestCallDepth:
    """max_call_depth ends recursion through macros and recursive loops."""

    def test_macro_recursing_without_end(self) -> None:
        """A macro calling itself forever."""
        error = crossed("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
        assert error.bound == "max_call_depth"
        assert str(error).startswith("the chat template nested calls deeper than 20")

    def test_mutual_recursion(self) -> None:
        """Two macros calling each other."""
        source = (
            "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}"
        )
        assert crossed(source).bound == "max_call_depth"

    def test_recursive_loop(self) -> None:
        """A recursive for loop that recurses into the same list forever."""
        source = "{% for x in items recursive %}{{ loop(items) }}{% endfor %}"
        assert crossed(source, items=[1]).bound == "max_call_depth"

    def test_python_recursion_limit_is_a_template_error(self) -> None:
        """With a depth bound above what Python allows, the RecursionError is reported too."""
        bounds = TemplateBounds(max_call_depth=1_000_000)
        error = crossed("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", bounds)
        assert error.bound == "max_call_depth"

    def test_recursion_that_ends(self) -> None:
        """Recursion 19 deep (each call one level) renders."""
        source = "{% macro f(n) %}{{ n }}{{ f(n - 1) if n > 1 }}{% endmacro %}{{ f(19) }}"
        assert rendered(source) == "".join(str(n) for n in range(19, 0, -1))


class TestValueSize:
    """max_output_chars caps every string and list the template makes, before making it."""

    @pytest.mark.parametrize(
        ("source", "what"),
        [
            ("{{ 'ab' * 10**9 }}", "a value (*) of 2000000000 characters"),
            ("{{ ['a'] * 10**9 }}", "a value (*) of 1000000000 items"),
            ("{{ '%1000000000s' % 'a' }}", "a string (%)"),
            ("{{ '{:>1000000000}'.format('a') }}", "a string (str.format)"),
            ("{{ '{:>{w}}'.format('a', w=10**9) }}", "a string (str.format)"),
            ("{{ 'a'.center(10**9) }}", "a string (str.center)"),
            ("{{ 'a\tb'.expandtabs(10**6) }}", "a string (str.expandtabs)"),
            ("{{ 'abc'.replace('', 'x' * 5000) }}", "a string (str.replace)"),
            ("{{ ('x' * 5000).join(['a'] * 5000) }}", "a string (str.join)"),
            ("{{ 'a' | center(10**9) }}", "a value (the center filter)"),
            ("{{ ('a\n' * 1000) | indent(100) }}", "a value (the indent filter)"),
            ("{{ 'abc' | replace('', 'x' * 5000) }}", "a value (the replace filter)"),
            ("{{ (['a'] * 5000) | join('x' * 5000) }}", "a value (the join filter)"),
            ("{{ '%1000000000s' | format('a') }}", "a value (the format filter)"),
            ("{{ [1] | batch(10**9, 0) | list }}", "a value (the batch filter)"),
            ("{{ messages | tojson(indent=10**9) }}", "a value (the tojson filter)"),
            ("{{ ['a'] | map('center', 10**9) | list }}", "a value (the center filter)"),
            ("{% filter center(10**9) %}a{% endfilter %}", "a value (the center filter)"),
        ],
    )
    def test_refused_before_it_is_made(self, source: str, what: str) -> None:
        """Each way of making a huge value from a small template is refused, quickly: a
        constant one too (jinja2 would fold it while compiling, where no bound holds)."""
        error = crossed(source)
        assert error.bound == "max_output_chars"
        assert f"asked for {what}" in str(error)
        assert str(error).endswith("more than max_output_chars (10000)")

    @pytest.mark.parametrize("operator", ["+", "~"])
    def test_doubling(self, operator: str) -> None:
        """A string doubled in a loop stops at the limit, whether by + or by ~."""
        source = (
            "{% set ns = namespace(s='ab') %}{% for i in range(60) %}"
            f"{{% set ns.s = ns.s {operator} ns.s %}}{{% endfor %}}"
        )
        assert crossed(source).bound == "max_output_chars"

    @pytest.mark.parametrize(
        "show", ["{{ grid }}", "{{ 'x' ~ grid }}", "{{ grid | string }}", "{{ grid | tojson }}"]
    )
    def test_nested_lists_as_text(self, show: str) -> None:
        """A list of 1,000 references to a list of 1,000 items is small in memory but not
        as text: writing it out (output, ~, string, tojson) is refused."""
        source = "{% set row = ['x'] * 1000 %}{% set grid = [row] * 1000 %}" + show
        assert crossed(source).bound == "max_output_chars"

    def test_within_the_bound(self) -> None:
        """Values up to the limit are made."""
        assert rendered("{{ 'ab' * 5000 }}") == "ab" * 5000
        assert rendered("{{ 'a'.center(9999) | length }}") == "9999"


class TestIntegers:
    """max_int_bits caps integers made by * and **."""

    def test_power(self) -> None:
        """2 ** 100000 is refused before it is computed."""
        error = crossed("{{ 2 ** 100000 }}")
        assert error.bound == "max_int_bits"
        assert str(error) == (
            "the chat template made an integer of more than 256 bits (max_int_bits)"
        )

    def test_repeated_squaring(self) -> None:
        """Squaring in a loop stops at the limit."""
        source = (
            "{% set ns = namespace(x=3) %}{% for i in range(40) %}"
            "{% set ns.x = ns.x * ns.x %}{% endfor %}"
        )
        assert crossed(source).bound == "max_int_bits"

    def test_within_the_bound(self) -> None:
        """2 ** 255 renders."""
        assert rendered("{{ 2 ** 255 }}") == str(2**255)


class TestOutput:
    """max_output_chars caps the output, counted as it is made."""

    def test_long_output(self) -> None:
        """A loop writing 100 characters 5,000 times stops past 10,000 characters."""
        error = crossed("{% for i in range(5000) %}{{ 'x' * 100 }}{% endfor %}")
        assert error.bound == "max_output_chars"
        assert str(error) == (
            "the chat template's output passed 10000 characters (max_output_chars)"
        )

    def test_exactly_the_limit(self) -> None:
        """An output of exactly max_output_chars renders."""
        assert len(rendered("{% for i in range(100) %}{{ 'x' * 100 }}{% endfor %}")) == 10_000


class TestDeadline:
    """max_seconds stops a render that is slow within the other bounds."""

    def test_slow_loops(self) -> None:
        """Loops of ten billion iterations stop at a 50 ms deadline."""
        bounds = TemplateBounds(max_seconds=0.05, max_iterations=10**12)
        started = time.monotonic()
        error = crossed(
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            bounds,
        )
        assert error.bound == "max_seconds"
        assert str(error) == "the chat template took more than 0.05 s to render (max_seconds)"
        # Wall time, as the deadline is; generous, as ten billion iterations take hours.
        assert time.monotonic() - started < 1.0

    def test_clock_is_checked_in_calls(self) -> None:
        """A budget whose clock has passed the deadline refuses the next call."""
        now = [0.0]
        budget = RenderBudget(TemplateBounds(max_seconds=1.0), clock=lambda: now[0])
        budget.enter_call()
        now[0] = 1.5
        with pytest.raises(Exception, match="max_seconds"):
            budget.enter_call()


class TestBoundsValues:
    """The bounds themselves."""

    def test_must_be_positive(self) -> None:
        """A zero or negative limit is refused, naming it."""
        with pytest.raises(ValueError, match="max_seconds must be positive"):
            TemplateBounds(max_seconds=0)

    def test_text_size_stops_past_the_limit(self) -> None:
        """text_size of a huge shared structure costs about its limit, not its size."""
        row = ["x"] * 10_000
        started = time.thread_time()
        assert text_size([row] * 10_000, 1000) > 1000
        assert time.thread_time() - started < 0.1
