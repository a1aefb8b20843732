"""Tests for the finite-number parser both command packages build their flag types on."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from switchboard.argtypes import finite_float


class TestFiniteFloat:
    @pytest.mark.parametrize(("text", "value"), [("1.5", 1.5), ("-2", -2.0), ("0", 0.0)])
    def test_a_finite_number_of_any_sign(self, text: str, value: float) -> None:
        """The range is the caller's: negative numbers and zero pass."""
        assert finite_float(text) == value

    @pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e999"])
    def test_refuses_what_is_not_finite(self, text: str) -> None:
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            finite_float(text)
        assert str(refused.value) == f"must be finite, got {text}"

    def test_names_what_was_expected(self) -> None:
        """The noun is the caller's; ``a number`` unless it says otherwise."""
        with pytest.raises(argparse.ArgumentTypeError) as plain:
            finite_float("x")
        with pytest.raises(argparse.ArgumentTypeError) as named:
            finite_float("x", expected="seconds")
        assert (str(plain.value), str(named.value)) == (
            "expected a number, got 'x'",
            "expected seconds, got 'x'",
        )

    def test_a_leaf_module(self) -> None:
        """Importing it loads neither command package (admin_cli must not import cli)."""
        probe = (
            "import sys, switchboard.argtypes\n"
            "print(sorted(m for m in sys.modules if m.startswith('switchboard.')))"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
        assert done.stdout.strip() == "['switchboard.argtypes']"
