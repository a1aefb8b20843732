"""How the CLIs find the stack key and the audit log: a client reads the key of a running
stack and never makes one; a router's guard names the key file and opens its audit file
at start; switchboard ctl finds its router in the run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from router_core.credentials import KEY_FILE, load_or_create
from switchboard.cli.access import audit_log, client_key, control_guard, key_file_of
from switchboard.cli.ctl import endpoint
from switchboard.cli.support import UsageError


def _args(**given: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "key_file": None,
        "audit_log": None,
        "endpoint": None,
        "detok_router": False,
    }
    values.update(given)
    return argparse.Namespace(**values)


class TestClientKey:
    """client_key: --key-file, else the run dir's stack.key, else none."""

    def test_run_dir_key_is_read(self, tmp_path: Path) -> None:
        """The key the stack made in its run dir is the one sent."""
        key = load_or_create(tmp_path / KEY_FILE)
        assert client_key(_args(), str(tmp_path)) == key

    def test_missing_key_is_a_usage_error_and_none_is_made(self, tmp_path: Path) -> None:
        """A run dir without a key is refused in one line naming the file; no key is
        created (the stack makes it, a client never does)."""
        with pytest.raises(UsageError, match=rf"key file {tmp_path}/stack.key: no such file"):
            client_key(_args(), str(tmp_path))
        assert not (tmp_path / KEY_FILE).exists()

    def test_key_file_wins_and_no_run_dir_is_no_key(self, tmp_path: Path) -> None:
        """--key-file is read over the run dir's; with neither, no key is sent."""
        key = load_or_create(tmp_path / "elsewhere.key")
        args = _args(key_file=str(tmp_path / "elsewhere.key"))
        assert client_key(args, str(tmp_path)) == key
        assert client_key(_args(), None) is None
        assert key_file_of(_args(), None) == ""


class TestControlGuard:
    """control_guard: what a router's control socket is given at start."""

    def test_guard_names_the_key_file_and_opens_the_audit_file(self, tmp_path: Path) -> None:
        """The refusal names the run dir's key file, and --audit-log exists at once, 0600."""
        log = tmp_path / "audit.jsonl"
        guard = control_guard(_args(audit_log=str(log)), str(tmp_path), "k" * 64, "x_router")
        assert guard.key == "k" * 64 and guard.role == "x_router"
        assert guard.refusal().endswith(f"send the key in {tmp_path}/{KEY_FILE}")
        assert log.exists() and log.stat().st_mode & 0o777 == 0o600
        assert guard.audit is not None
        guard.audit.close()

    def test_unusable_audit_file_is_a_usage_error(self, tmp_path: Path) -> None:
        """An audit file that cannot be opened stops the start, in one line."""
        with pytest.raises(UsageError, match=r"^--audit-log .*/absent/a\.jsonl: "):
            audit_log(_args(audit_log=str(tmp_path / "absent" / "a.jsonl")))


class TestCtlEndpoint:
    """switchboard ctl finds its router in the run dir unless told the endpoint."""

    def test_endpoints(self, tmp_path: Path) -> None:
        """The tokenizer router's control socket by default, the detokenizer router's
        with --detok-router, --endpoint over both, and a usage error with neither."""
        assert endpoint(_args(), str(tmp_path)) == f"ipc://{tmp_path}/router-control"
        detok = endpoint(_args(detok_router=True), str(tmp_path))
        assert detok == f"ipc://{tmp_path}/detok-router-control"
        assert endpoint(_args(endpoint="ipc:///x"), str(tmp_path)) == "ipc:///x"
        with pytest.raises(UsageError, match="give --run-dir or --endpoint"):
            endpoint(_args(), None)
