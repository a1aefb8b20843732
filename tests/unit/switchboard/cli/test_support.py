"""What the subcommands share: validators, endpoint and run-dir checks, the one-line parser,
the log format, and flags generated from settings dataclasses."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from router_core.settings_fields import FlagSpec, flag_specs, flagged
from switchboard.cli.flags import add_settings_flags, settings_values
from switchboard.cli.support import (
    OneLineParser,
    UsageError,
    checked_endpoint,
    log_format,
    log_level,
    non_negative_float,
    non_negative_int,
    outputs_via,
    port,
    positive_float,
    positive_int,
    run_dir,
    seconds,
)


class TestValidators:
    """Each validator accepts its range and refuses the rest with a one-line reason."""

    @pytest.mark.parametrize(
        ("validator", "text", "value"),
        [
            (positive_float, "0.5", 0.5),
            (non_negative_float, "0", 0.0),
            (seconds, "2", 2.0),
            (positive_int, "3", 3),
            (non_negative_int, "0", 0),
            (port, "65535", 65535),
            (log_level, "debug", "debug"),
            (outputs_via, "direct", "direct"),
            (outputs_via, "router", "router"),
            (outputs_via, "detokenizers", "direct"),
            (outputs_via, "workers", "direct"),
        ],
    )
    def test_accepts(self, validator: object, text: str, value: object) -> None:
        """A value in range comes back converted (an old outputs_via value as direct)."""
        assert callable(validator)
        assert validator(text) == value

    @pytest.mark.parametrize(
        ("validator", "text", "reason"),
        [
            (positive_float, "0", "must be > 0, got 0"),
            (positive_float, "nan", "must be finite"),
            (positive_float, "soon", "expected a number, got 'soon'"),
            (non_negative_float, "-1", "must be >= 0, got -1"),
            (seconds, "soon", "expected seconds, got 'soon'"),
            (seconds, "inf", "must be finite"),
            (positive_int, "0", "must be > 0, got 0"),
            (positive_int, "1.5", "expected a whole number, got '1.5'"),
            (non_negative_int, "-2", "must be >= 0, got -2"),
            (port, "0", "must be 1..65535, got 0"),
            (port, "65536", "must be 1..65535, got 65536"),
            (log_level, "chatty", "not a logging level: chatty"),
            (outputs_via, "sideways", "'direct' or 'router'"),
        ],
    )
    def test_refuses(self, validator: object, text: str, reason: str) -> None:
        """A value out of range is an ArgumentTypeError saying why."""
        assert callable(validator)
        with pytest.raises(argparse.ArgumentTypeError, match=reason):
            validator(text)


class TestHelpers:
    """Endpoints, the run directory, the parser's errors and the log line."""

    def test_endpoint_given_default_or_missing(self) -> None:
        """The given endpoint wins over the default; neither is a UsageError naming the flag."""
        assert checked_endpoint("ipc:///a", "ipc:///b", "--x", allow_remote=False) == "ipc:///a"
        assert checked_endpoint(None, "ipc:///b", "--x", allow_remote=False) == "ipc:///b"
        with pytest.raises(UsageError, match="--x is required without --run-dir"):
            checked_endpoint(None, None, "--x", allow_remote=False)

    def test_remote_endpoint_needs_opt_in(self) -> None:
        """A tcp endpoint beyond loopback is refused unless remote is allowed."""
        with pytest.raises(UsageError, match=r"10\.1\.2\.3"):
            checked_endpoint("tcp://10.1.2.3:5", None, "--x", allow_remote=False)
        remote = checked_endpoint("tcp://10.1.2.3:5", None, "--x", allow_remote=True)
        assert remote == "tcp://10.1.2.3:5"

    def test_run_dir_must_be_a_directory(self, tmp_path: Path) -> None:
        """--run-dir is returned when it is a directory, refused when it is not."""
        assert run_dir(argparse.Namespace(run_dir=str(tmp_path))) == str(tmp_path)
        assert run_dir(argparse.Namespace(run_dir=None)) is None
        with pytest.raises(UsageError, match="not a directory"):
            run_dir(argparse.Namespace(run_dir=str(tmp_path / "absent")))

    def test_parser_error_is_one_line(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A bad flag is ``prog: error: ... (see --help)``, exit 2, one line."""
        parser = OneLineParser(prog="switchboard demo")
        parser.add_argument("--hwm", type=positive_int)
        with pytest.raises(SystemExit) as caught:
            parser.parse_args(["--hwm", "0"])
        assert caught.value.code == 2
        err = capsys.readouterr().err
        assert err == "switchboard demo: error: argument --hwm: must be > 0, got 0 (see --help)\n"

    def test_log_format_names_who(self) -> None:
        """The log line carries time, level, who and the pid; who defaults to the logger."""
        assert log_format() == "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"
        assert "worker w0[%(process)d]" in log_format("worker w0")


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
