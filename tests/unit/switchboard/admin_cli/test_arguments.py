"""The operator commands' argument rules: one place, the server's range for a barrier's
timeout, no empty flag standing for the environment."""

from __future__ import annotations

import argparse

import pytest

from router_core.limits import MAX_BARRIER_TIMEOUT_S
from switchboard.admin_cli.arguments import (
    DEFAULT_URL,
    Connection,
    barrier_timeout,
    connection,
    http_timeout,
    token,
    url,
    worker_id,
)
from switchboard.cli import main


class TestValidators:
    """Each flag's type accepts its range and refuses the rest, saying why."""

    @pytest.mark.parametrize("text", ["0.001", "5", str(MAX_BARRIER_TIMEOUT_S), "600"])
    def test_barrier_timeout_accepts_the_api_range(self, text: str) -> None:
        """Anything in 0 < S <= 600 passes, the upper bound included."""
        assert barrier_timeout(text) == float(text)

    @pytest.mark.parametrize("text", ["0", "-1", "600.001", "700", "inf", "nan", "soon"])
    def test_barrier_timeout_refuses_the_rest(self, text: str) -> None:
        """Outside the admin API's range, or not a number: refused locally."""
        with pytest.raises(argparse.ArgumentTypeError):
            barrier_timeout(text)

    def test_barrier_timeout_names_the_range(self) -> None:
        """The refusal states the range, from the constant the server uses."""
        with pytest.raises(argparse.ArgumentTypeError, match="at most 600 seconds"):
            barrier_timeout("700")

    def test_http_timeout_has_no_upper_bound(self) -> None:
        """The HTTP wait of a read is only > 0."""
        assert http_timeout("3600") == 3600.0
        with pytest.raises(argparse.ArgumentTypeError):
            http_timeout("0")

    def test_empty_token_is_refused(self) -> None:
        """``--token=`` is a usage error saying how to use the variable instead."""
        with pytest.raises(argparse.ArgumentTypeError, match="leave --token out"):
            token("")

    def test_token_no_header_can_carry(self) -> None:
        """A token with a space is refused without repeating it."""
        with pytest.raises(argparse.ArgumentTypeError) as caught:
            token("two SECRETWORD")
        assert "SECRETWORD" not in str(caught.value)

    def test_urls(self) -> None:
        """A URL loses its trailing slash; an empty or non-http one is refused."""
        assert url("http://127.0.0.1:9/") == "http://127.0.0.1:9"
        for bad in ("", "ftp://x", "localhost:8001"):
            with pytest.raises(argparse.ArgumentTypeError):
                url(bad)


class TestConnection:
    """Flags over variables over the default; a variable held to its flag's rules."""

    def test_flags_win(self) -> None:
        """Given flags are used as they are, whatever the environment says."""
        environ = {"SWITCHBOARD_ADMIN_URL": "http://a:1", "SWITCHBOARD_ADMIN_TOKEN": "env"}
        assert connection("http://b:2", "flag", environ) == Connection("http://b:2", "flag")

    def test_variables_then_default(self) -> None:
        """Without flags the variables, and without those the default URL and no token;
        an empty variable counts as unset."""
        environ = {"SWITCHBOARD_ADMIN_URL": "http://a:1/", "SWITCHBOARD_ADMIN_TOKEN": "env"}
        assert connection(None, None, environ) == Connection("http://a:1", "env")
        empty = {"SWITCHBOARD_ADMIN_URL": "", "SWITCHBOARD_ADMIN_TOKEN": ""}
        assert connection(None, None, empty) == Connection(DEFAULT_URL, None)

    def test_bad_variables_are_named(self) -> None:
        """A variable breaking its flag's rule is refused naming the variable, never the
        token."""
        with pytest.raises(ValueError, match="SWITCHBOARD_ADMIN_URL='ftp://x'"):
            connection(None, None, {"SWITCHBOARD_ADMIN_URL": "ftp://x"})
        with pytest.raises(ValueError, match="SWITCHBOARD_ADMIN_TOKEN holds") as caught:
            connection(None, None, {"SWITCHBOARD_ADMIN_TOKEN": "a SECRETWORD"})
        assert "SECRETWORD" not in str(caught.value)


class TestCommandLine:
    """The rules apply while parsing: exit 2 before any request is sent."""

    @pytest.mark.parametrize(
        ("words", "reason"),
        [
            (["pause", "--timeout", "0"], "at most 600 seconds (the admin API's range), got 0"),
            (["pause", "--timeout", "700"], "at most 600 seconds (the admin API's range), got 700"),
            (["continue", "--timeout-s", "601"], "got 601"),
            (["status", "--token="], "argument --token: is empty"),
            (["workers", "--url="], "argument --url: is empty"),
        ],
    )
    def test_usage_errors(
        self, words: list[str], reason: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each is one line naming the command and the rule, exit 2."""
        with pytest.raises(SystemExit) as caught:
            main([*words, "--url=http://127.0.0.1:9"] if "--url=" not in words else words)
        assert caught.value.code == 2
        line = capsys.readouterr().err.strip()
        assert line.startswith(f"switchboard {words[0]}: error: ")
        assert reason in line


class TestWorkerId:
    """drain and undrain take only ids the router could have registered."""

    def test_valid_ids_pass(self) -> None:
        """Letters, digits, ``.``, ``_`` and ``-`` pass unchanged."""
        assert worker_id("w0") == "w0"
        assert worker_id("gpu-3.node_a") == "gpu-3.node_a"

    @pytest.mark.parametrize("text", ["", "a b", "-w0", "w/0", "x" * 65, "w\n0"])
    def test_impossible_ids_are_refused(self, text: str) -> None:
        """An id no worker can have is a usage error stating the rule."""
        with pytest.raises(argparse.ArgumentTypeError, match="expected 1 to 64 of A-Z"):
            worker_id(text)

    def test_drain_refuses_before_sending(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``drain 'a b'`` exits 2 naming the argument, nothing sent."""
        with pytest.raises(SystemExit) as caught:
            main(["drain", "a b", "--url=http://127.0.0.1:9"])
        assert caught.value.code == 2
        assert capsys.readouterr().err.startswith("switchboard drain: error: argument WORKER_ID: ")
