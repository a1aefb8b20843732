"""Checks made before anything starts: the port is free, the run directory short enough,
the tokenizer and the audit file usable; each refusal naming its setting."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from switchboard.supervisor.preflight import (
    check_audit_log,
    check_port_free,
    check_run_dir,
    check_tokenizer,
    preflight,
)
from switchboard.supervisor.settings import SettingsError, StackSettings, load_settings


def free_port() -> int:
    """A loopback port nobody listens on (as the test starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TestPreflight:
    """Checks made before anything starts."""

    def test_port_in_use_is_refused(self) -> None:
        """A port with a listener (even one using SO_REUSEPORT) is reported in use."""
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            with pytest.raises(SettingsError, match="already in use"):
                check_port_free("127.0.0.1", port)
        check_port_free("127.0.0.1", port)

    def test_run_dir_too_deep_for_ipc(self, tmp_path: Path) -> None:
        """A run directory whose socket paths exceed the kernel's limit is refused."""
        with pytest.raises(SettingsError, match="too long"):
            check_run_dir(tmp_path / ("d" * 120))


class TestNamedRefusals:
    """A refusal names the setting as it was given (file and key, flag or variable), what
    is wrong and what is expected."""

    def settings(self, tmp_path: Path, toml: str) -> StackSettings:
        """``toml`` as the --config file; the ports not named there free ones."""
        config = tmp_path / "stack.toml"
        config.write_text(toml, encoding="utf-8")
        ports = {name: str(free_port()) for name in ("port", "admin_port") if name not in toml}
        return load_settings(ports, config_file=config)

    def test_missing_tokenizer_in_toml(self, tmp_path: Path) -> None:
        """docs/operating.md's example without the model: file, key, value, and what a
        tokenizer path may be."""
        settings = self.settings(tmp_path, 'tokenizer = "/models/my-model"\n')
        with pytest.raises(SettingsError) as caught:
            preflight(settings)
        assert str(caught.value) == (
            f'{tmp_path / "stack.toml"}: tokenizer = "/models/my-model": not found '
            "(expected a tokenizer.json file, or a model directory holding one)"
        )

    def test_directory_without_tokenizer_json(self, tmp_path: Path) -> None:
        """A directory is accepted only when it holds a tokenizer.json; the flag is named."""
        model = tmp_path / "model"
        model.mkdir()
        with pytest.raises(SettingsError) as caught:
            check_tokenizer(model, where=f"--tokenizer {model}")
        assert str(caught.value).startswith(
            f"--tokenizer {model}: the directory holds no tokenizer.json (expected"
        )

    def test_not_a_tokenizer(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A file that does not parse is named by its variable, and the file read."""
        bogus = tmp_path / "tokenizer.json"
        bogus.write_text("{not json", encoding="utf-8")
        monkeypatch.setenv("SWITCHBOARD_TOKENIZER", str(bogus))
        with pytest.raises(SettingsError) as caught:
            check_tokenizer(bogus, where=load_settings({}).origin("tokenizer"))
        assert str(caught.value).startswith(
            f"SWITCHBOARD_TOKENIZER={bogus}: {bogus} is not a valid tokenizer.json: "
        )

    def test_port_in_use_names_the_setting(self, tmp_path: Path) -> None:
        """A busy port is named as the file gave it."""
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            settings = self.settings(tmp_path, f"port = {port}\n")
            with pytest.raises(SettingsError) as caught:
                preflight(settings)
        assert str(caught.value) == (
            f"{tmp_path / 'stack.toml'}: port = {port}: already in use on 127.0.0.1"
        )

    def test_a_default_is_named_as_one(self) -> None:
        """A setting nobody gave is named with its default."""
        assert load_settings({}).origin("port") == "port 8000 (default)"

    def test_audit_log_that_cannot_be_opened(self, tmp_path: Path) -> None:
        """An audit file in a missing directory is refused naming the flag; one that can
        be opened is created 0600."""
        missing = tmp_path / "absent" / "audit.jsonl"
        settings = load_settings({"admin_audit_log": str(missing)})
        with pytest.raises(SettingsError, match="cannot open for appending") as caught:
            check_audit_log(settings.admin_audit_log, where=settings.origin("admin_audit_log"))
        assert str(caught.value).startswith(f"--admin-audit-log {missing}: ")
        fine = tmp_path / "audit.jsonl"
        check_audit_log(fine)
        assert fine.stat().st_mode & 0o777 == 0o600

    def test_secret_stays_hidden(self, tmp_path: Path) -> None:
        """A token list is never shown, from the file either."""
        settings = self.settings(tmp_path, 'admin_operator_tokens = "ops:s3cretvalue"\n')
        assert settings.origin("admin_operator_tokens").endswith("admin_operator_tokens = (hidden)")
