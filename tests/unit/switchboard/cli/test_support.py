"""What the subcommands share: validators, endpoint and run-dir checks, the one-line parser
and the log format."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

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

    def test_run_dir_must_be_private(self, tmp_path: Path) -> None:
        """A standalone process refuses a --run-dir others could reach, or a link to one,
        in one line saying how to fix it."""
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        with pytest.raises(UsageError) as refused:
            run_dir(argparse.Namespace(run_dir=str(shared)))
        assert str(refused.value) == (
            f"--run-dir {shared}: mode 0777 lets other users reach the stack's sockets and "
            f"key (chmod 700 {shared}, or use another directory)"
        )
        (tmp_path / "link").symlink_to(tmp_path)
        with pytest.raises(UsageError, match="symbolic link"):
            run_dir(argparse.Namespace(run_dir=str(tmp_path / "link")))

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
