"""How the command line reports what it cannot parse: under the subcommand's name, with
the closest option; and ``--version`` at every level."""

from __future__ import annotations

import argparse

import pytest

from router_core.version import package_version
from switchboard.cli import ADMIN_COMMANDS, SUBCOMMANDS, main
from switchboard.cli.parsing import OneLineParser, VersionAction, did_you_mean, unrecognized

#: What a subcommand needs besides flags before it gets as far as an unknown one.
REQUIRED = {
    "bench": ("router",),
    "ctl": ("status",),
    "drain": ("w0",),
    "gateway": (
        "--listen",
        "tcp://127.0.0.1:7100",
        "--curve-key-pair",
        "k",
        "--authorised-keys",
        "a",
    ),
    "keys": ("generate", "host-a"),
    "models": ("demo",),
    "undrain": ("w0",),
    "vocab": ("--out", "/dev/null"),
    "worker": ("--worker-id", "w0"),
}


def refusal(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    """The one stderr line of ``switchboard WORDS``, checked to exit 2."""
    with pytest.raises(SystemExit) as caught:
        main(list(words))
    assert caught.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


class TestDidYouMean:
    """The closest choice, or nothing when none is close."""

    def test_close_and_far(self) -> None:
        """A one-letter slip finds its option; an unrelated word finds none."""
        assert did_you_mean("--modee", ["--mode", "--url"]) == " (did you mean --mode?)"
        assert did_you_mean("--zzzz", ["--mode", "--url"]) == ""

    def test_unrecognized_names_the_closest_option_once(self) -> None:
        """Each unknown option gets its hint (``--flag=value`` by its name); values don't."""
        parser = argparse.ArgumentParser()
        parser.add_argument("--mode")
        parser.add_argument("--workers")
        assert unrecognized(["--modee", "in_place", "--wokers=2"], parser) == (
            "unrecognized arguments: --modee in_place --wokers=2 (did you mean --mode?)"
            " (did you mean --workers?)"
        )


class TestSubcommandErrors:
    """An unknown word is reported by the subcommand it was given to."""

    def test_pause_misspelt_flag(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``pause --modee in_place`` names pause and suggests --mode."""
        assert refusal(capsys, "pause", "--modee", "in_place") == (
            "switchboard pause: error: unrecognized arguments: --modee in_place "
            "(did you mean --mode?) (see --help)"
        )

    def test_up_misspelt_flag(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``up --wokers 2`` names up and suggests --workers."""
        assert refusal(capsys, "up", "--wokers", "2") == (
            "switchboard up: error: unrecognized arguments: --wokers 2 "
            "(did you mean --workers?) (see --help)"
        )

    @pytest.mark.parametrize("command", sorted(set(SUBCOMMANDS) | ADMIN_COMMANDS))
    def test_every_subcommand_names_itself(
        self, command: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Whatever the subcommand, an unknown flag's error starts with its name."""
        required = REQUIRED.get(command, ())
        line = refusal(capsys, command, *required, "--no-such-flag-anywhere")
        assert line.startswith(f"switchboard {command}: error: unrecognized arguments: ")

    def test_unknown_command(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A misspelt command is refused with the closest one."""
        assert refusal(capsys, "stauts") == (
            "switchboard: error: unknown command 'stauts' (did you mean status?) (see --help)"
        )

    def test_chosen_without_subcommands(self) -> None:
        """A parser without subcommands reports its own errors."""
        parser = OneLineParser(prog="demo")
        assert parser.chosen(argparse.Namespace()) is parser


class TestVersion:
    """``--version`` prints the installed distribution's version and exits 0."""

    @pytest.mark.parametrize("words", [["--version"], ["status", "--version"], ["up", "--version"]])
    def test_version(self, words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """At the top and under a subcommand alike: ``switchboard <version>``."""
        with pytest.raises(SystemExit) as caught:
            main(words)
        assert caught.value.code == 0
        assert capsys.readouterr().out == f"switchboard {package_version()}\n"

    def test_read_only_when_given(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Building a parser with --version does not look the version up."""
        import router_core.version

        def fail() -> str:
            raise AssertionError("version looked up")

        monkeypatch.setattr(router_core.version, "package_version", fail)
        parser = OneLineParser(prog="demo")
        parser.add_argument("--version", action=VersionAction)
        assert parser.parse_args([]) == argparse.Namespace()
