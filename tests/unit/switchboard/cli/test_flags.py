"""Flags generated from settings dataclasses: which fields become flags, defaults, aliases,
bounds and help."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Literal

import pytest

from router_core.settings_fields import FlagSpec, flag_specs, flagged
from switchboard.cli.flags import add_settings_flags, settings_values
from switchboard.cli.support import OneLineParser

Mode = Literal["fast", "slow"]


@dataclass(frozen=True, kw_only=True)
class DemoSettings:
    """A settings class of every kind of flagged field, and one unflagged."""

    name: str = flagged(help="required, no default")
    mode: Mode = flagged("fast", help="a choice")
    wait_s: float = flagged(1.5, help="a 100% duration", aliases=("--wait",), bound="positive")
    count: int = flagged(3, help="a count", flag="--how-many", bound="non_negative")
    hidden: int = 7


class TestSettingsFlags:
    """Flags generated from flagged dataclass fields."""

    def parser(self) -> argparse.ArgumentParser:
        parser = OneLineParser(prog="demo")
        add_settings_flags(parser, DemoSettings)
        return parser

    def test_only_flagged_fields_are_flags(self) -> None:
        """flag_specs lists the flagged fields; the rest stay settings only."""
        assert [field.name for field, _ in flag_specs(DemoSettings)] == [
            "name", "mode", "wait_s", "count",
        ]  # fmt: skip
        assert FlagSpec(help="x").option("wait_s") == "--wait-s"

    def test_values_defaults_and_aliases(self) -> None:
        """Defaults are the fields'; an alias sets the same field; values build the settings."""
        args = self.parser().parse_args(["--name", "n", "--wait", "2", "--how-many", "0"])
        values = settings_values(args, DemoSettings)
        assert values == {"name": "n", "mode": "fast", "wait_s": 2.0, "count": 0}
        assert DemoSettings(**values) == DemoSettings(name="n", wait_s=2.0, count=0)

    @pytest.mark.parametrize(
        "words",
        [[], ["--name", "n", "--mode", "medium"], ["--name", "n", "--wait-s", "0"]],
    )
    def test_refusals(self, words: list[str]) -> None:
        """A missing required flag, an unknown choice or an out-of-bound value exits 2."""
        with pytest.raises(SystemExit) as caught:
            self.parser().parse_args(words)
        assert caught.value.code == 2

    def test_help_shows_defaults_and_aliases(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--help lists each alias beside its flag and the default (a % is shown as is)."""
        with pytest.raises(SystemExit):
            self.parser().parse_args(["--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "--wait-s S, --wait S a 100% duration (default 1.5)" in out
        assert "required, no default (required)" in out

    def test_a_field_without_a_validator_is_refused(self) -> None:
        """A flagged type with no validator is a TypeError when the parser is built."""

        @dataclass
        class Odd:
            ratio: complex = dataclasses.field(
                default=1j, metadata={"router_core.flag": FlagSpec(help="odd")}
            )

        with pytest.raises(TypeError, match=r"Odd\.ratio"):
            add_settings_flags(argparse.ArgumentParser(), Odd)
