"""``switchboard worker --gateway``: the flags it needs, and a gateway that is not there."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from router_core.curve_files import write_key_pair
from switchboard.cli.support import UsageError
from switchboard.worker import cli


def parse(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    return parser.parse_args(["worker", "--worker-id", "r0", *words])


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    tmp_path.chmod(0o700)
    write_key_pair(tmp_path, "control")
    write_key_pair(tmp_path, "host-a")
    stack_key = tmp_path / "stack.key"
    stack_key.write_text("k" * 64 + "\n")
    stack_key.chmod(0o600)
    return tmp_path


class TestGatewayFlags:
    def test_needs_its_keys(self) -> None:
        """--gateway without the key pair, the gateway's public key or the stack key: one line."""
        with pytest.raises(UsageError, match="--gateway needs --curve-key-pair"):
            cli.settings(parse("--gateway", "tcp://127.0.0.1:7100"))

    def test_bad_key_file_is_named(self, keys: Path) -> None:
        """A public key file that holds no key is named in the refusal."""
        (keys / "bad.public").write_text("nonsense\n")
        args = parse(
            *("--gateway", "tcp://127.0.0.1:7100"),
            *("--curve-key-pair", str(keys / "host-a.secret")),
            *("--gateway-public-key", str(keys / "bad.public")),
            *("--key-file", str(keys / "stack.key")),
        )
        with pytest.raises(UsageError, match=r"bad\.public"):
            cli.settings(args)

    def test_no_gateway_there_is_a_bounded_clear_error(
        self, keys: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Nobody listening at --gateway: a UsageError after the wait, naming the endpoint."""
        monkeypatch.setattr(cli, "GATEWAY_WAIT_S", 0.3)
        args = parse(
            *("--gateway", "tcp://127.0.0.1:1"),
            *("--curve-key-pair", str(keys / "host-a.secret")),
            *("--gateway-public-key", str(keys / "control.public")),
            *("--key-file", str(keys / "stack.key")),
        )
        with pytest.raises(UsageError, match=r"tcp://127.0.0.1:1 did not answer within 0.3 s"):
            cli.settings(args)
