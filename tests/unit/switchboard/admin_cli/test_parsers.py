"""The operator commands' parsers: the commands switchboard.cli dispatches here, their help,
usage errors and defaults."""

from __future__ import annotations

import argparse

import pytest

from switchboard.admin_cli import EPILOG, add_parsers
from switchboard.cli import ADMIN_COMMANDS, build_parser, main
from tests.unit.switchboard.admin_cli.canned_api import parse


class TestParsers:
    """The commands switchboard.cli dispatches here are the ones added here."""

    def test_names_match_admin_commands(self) -> None:
        """add_parsers adds exactly switchboard.cli's ADMIN_COMMANDS."""
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        add_parsers(sub)
        assert set(sub.choices) == ADMIN_COMMANDS

    def test_help_documents_exit_statuses(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Each command's --help ends with the environment and the exit statuses."""
        for command in sorted(ADMIN_COMMANDS):
            with pytest.raises(SystemExit) as caught:
                build_parser(with_up_flags=False).parse_args([command, "--help"])
            assert caught.value.code == 0
            out = capsys.readouterr().out
            assert EPILOG in out
            assert "3  the admin app is unreachable" in out

    @pytest.mark.parametrize(
        "words",
        [
            ["pause", "--mode", "sideways"],
            ["pause", "--timeout", "0"],
            ["continue", "--timeout", "-1"],
            ["status", "--timeout", "nan"],
            ["workers", "--timeout", "soon"],
            ["drain"],
            ["undrain", "a", "b"],
        ],
    )
    def test_usage_errors_exit_2(
        self, words: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A bad command line exits 2 with one line on stderr."""
        with pytest.raises(SystemExit) as caught:
            main(words)
        assert caught.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1

    def test_defaults(self) -> None:
        """Mode abort; url, token and timeout unset until the environment is read."""
        args = parse("pause")
        assert (args.mode, args.url, args.token, args.timeout, args.json) == (
            "abort",
            None,
            None,
            None,
            False,
        )
