"""The stack settings: precedence, refusals, renamed settings, and docs/operating.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchboard.supervisor.settings import (
    RENAMED,
    SettingsError,
    StackSettings,
    env_name,
    flag_name,
    is_loopback_host,
    load_settings,
)


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


class TestPrecedence:
    """Flags over environment over TOML over defaults, one field at a time."""

    def test_defaults(self) -> None:
        """With nothing given, the documented defaults apply."""
        settings = load_settings({})
        assert (settings.workers, settings.detokenizers) == (2, 2)
        assert (settings.host, settings.port, settings.admin_port) == ("127.0.0.1", 8000, 8001)
        assert settings.tokenizer is None and settings.run_dir is None
        assert settings.model_name == "switchboard-sim"
        assert settings.outputs_via == "direct"
        assert settings.drain_timeout_s == 30.0
        assert (settings.restart_backoff_initial_s, settings.restart_backoff_max_s) == (0.5, 10.0)
        assert settings.restart_reset_after_s == 30.0

    def test_each_layer_overrides_the_one_below(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A key set in every layer takes the flag; one set below the flag takes the env."""
        config = write_toml(
            tmp_path / "stack.toml", "workers = 3\nport = 9001\ndetokenizers = 4\nstep_time = 0.2\n"
        )
        monkeypatch.setenv("SWITCHBOARD_WORKERS", "5")
        monkeypatch.setenv("SWITCHBOARD_PORT", "9002")
        settings = load_settings({"workers": "7"}, config_file=config)
        assert settings.workers == 7  # flag > env > toml
        assert settings.port == 9002  # env > toml
        assert settings.detokenizers == 4  # toml > default
        assert settings.step_time_s == 0.2  # under its old key
        assert settings.max_running_requests == 256  # default

    def test_boolean_from_env_and_toml(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """allow_remote reads as a boolean from the file and from the environment."""
        tokens = 'admin_operator_tokens = "ops:remote-t0ken-of-24-chars"\n'
        config = write_toml(tmp_path / "s.toml", 'allow_remote = true\nhost = "0.0.0.0"\n' + tokens)
        assert load_settings({}, config_file=config).allow_remote is True
        monkeypatch.setenv("SWITCHBOARD_ALLOW_REMOTE", "1")
        remote = {"host": "0.0.0.0", "admin_operator_tokens": "ops:remote-t0ken-of-24-chars"}
        assert load_settings(remote).allow_remote is True

    def test_foreign_switchboard_variables_are_accepted(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """SWITCHBOARD_CACHE_DIR and SWITCHBOARD_NO_FASTPATH belong to others and pass."""
        monkeypatch.setenv("SWITCHBOARD_CACHE_DIR", "/tmp/cache")
        monkeypatch.setenv("SWITCHBOARD_NO_FASTPATH", "1")
        assert load_settings({}).workers == 2


class TestErrors:
    """Every refusal is one line naming where the bad value came from."""

    def refusal(self, cli: dict[str, object], config: Path | None = None) -> str:
        with pytest.raises(SettingsError) as caught:
            load_settings(cli, config_file=config)
        message = str(caught.value)
        assert "\n" not in message
        return message

    @pytest.mark.parametrize("field", ["workers", "detokenizers"])
    def test_zero_processes(self, field: str) -> None:
        """workers=0 or detokenizers=0 is refused, naming the flag."""
        assert flag_name(field) in self.refusal({field: "0"})

    def test_unknown_toml_key(self, tmp_path: Path) -> None:
        """A misspelt key in the file is refused with a suggestion."""
        message = self.refusal({}, write_toml(tmp_path / "s.toml", "wrokers = 2\n"))
        assert "unknown key 'wrokers'" in message and "workers" in message

    def test_bad_toml(self, tmp_path: Path) -> None:
        """A file that is not TOML is refused, naming the file."""
        path = write_toml(tmp_path / "s.toml", "workers = = 2\n")
        assert "not valid TOML" in self.refusal({}, path)

    def test_missing_config_file(self, tmp_path: Path) -> None:
        """A --config file that does not exist is refused (not silently ignored)."""
        assert "not found" in self.refusal({}, tmp_path / "absent.toml")

    def test_bad_value_in_toml_names_the_file(self, tmp_path: Path) -> None:
        """A bad value in the file is reported with the file and key."""
        path = write_toml(tmp_path / "s.toml", "port = 70000\n")
        assert f"{path}: port = 70000" in self.refusal({}, path)

    def test_unknown_environment_variable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A misspelt SWITCHBOARD_ variable is refused with a suggestion."""
        monkeypatch.setenv("SWITCHBOARD_WORKRES", "3")
        message = self.refusal({})
        assert "SWITCHBOARD_WORKRES" in message and "SWITCHBOARD_WORKERS" in message

    def test_bad_environment_value_names_the_variable(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A bad value from the environment is reported with the variable's name."""
        monkeypatch.setenv("SWITCHBOARD_DETOKENIZERS", "many")
        assert "SWITCHBOARD_DETOKENIZERS=many" in self.refusal({})

    def test_remote_host_needs_opt_in(self) -> None:
        """A host beyond loopback is refused unless allow_remote is set."""
        assert "--allow-remote" in self.refusal({"host": "0.0.0.0"})
        remote = {
            "host": "0.0.0.0",
            "allow_remote": True,
            "admin_operator_tokens": "o:remote-t0ken-of-24-chars",
        }
        assert load_settings(remote).host == "0.0.0.0"

    def test_admin_port_must_differ(self) -> None:
        """The admin port cannot be the workers' port."""
        assert "admin_port" in self.refusal({"port": "9000", "admin_port": "9000"})

    def test_log_level_is_checked_and_normalised(self) -> None:
        """A log level is upper-cased; an unknown one is refused."""
        assert load_settings({"log_level": "debug"}).log_level == "DEBUG"
        assert "--log-level" in self.refusal({"log_level": "chatty"})

    @pytest.mark.parametrize(
        ("host", "loopback"),
        [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True),
         ("localhost", True), ("0.0.0.0", False), ("10.0.0.1", False), ("example.com", False)],
    )  # fmt: skip
    def test_loopback_hosts(self, host: str, loopback: bool) -> None:
        """Loopback addresses and 'localhost' are local; wildcards and names are not."""
        assert is_loopback_host(host) is loopback


class TestRenamedSettings:
    """Old names (step_time, per_token_cost, graceful_timeout) still work everywhere."""

    def test_old_toml_keys_set_the_new_settings(self, tmp_path: Path) -> None:
        """Each old TOML key sets its renamed setting."""
        config = write_toml(
            tmp_path / "s.toml", "step_time = 0.2\nper_token_cost = 0.01\ngraceful_timeout = 3\n"
        )
        settings = load_settings({}, config_file=config)
        assert (settings.step_time_s, settings.per_token_cost_s) == (0.2, 0.01)
        assert settings.graceful_timeout_s == 3.0

    def test_old_variables_set_the_new_settings(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """SWITCHBOARD_STEP_TIME and SWITCHBOARD_GRACEFUL_TIMEOUT are still read."""
        monkeypatch.setenv("SWITCHBOARD_STEP_TIME", "0.3")
        monkeypatch.setenv("SWITCHBOARD_GRACEFUL_TIMEOUT", "4")
        settings = load_settings({})
        assert (settings.step_time_s, settings.graceful_timeout_s) == (0.3, 4.0)

    def test_old_names_keep_their_layer(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An old variable beats the file and loses to a flag, like the new one."""
        config = write_toml(tmp_path / "s.toml", "step_time_s = 0.1\ngraceful_timeout_s = 1\n")
        monkeypatch.setenv("SWITCHBOARD_STEP_TIME", "0.3")
        monkeypatch.setenv("SWITCHBOARD_GRACEFUL_TIMEOUT", "4")
        settings = load_settings({"graceful_timeout_s": "5"}, config_file=config)
        assert (settings.step_time_s, settings.graceful_timeout_s) == (0.3, 5.0)

    def test_old_and_new_name_together_are_refused(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """One setting under both names in one place is one line naming both."""
        config = write_toml(tmp_path / "s.toml", "step_time = 0.1\nstep_time_s = 0.2\n")
        with pytest.raises(SettingsError, match="step_time and step_time_s are the same"):
            load_settings({}, config_file=config)
        monkeypatch.setenv("SWITCHBOARD_PER_TOKEN_COST", "0")
        monkeypatch.setenv("SWITCHBOARD_PER_TOKEN_COST_S", "0")
        with pytest.raises(SettingsError, match="are the same setting"):
            load_settings({})

    def test_a_bad_value_is_named_as_written(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The refusal quotes the old variable or key the operator used."""
        monkeypatch.setenv("SWITCHBOARD_STEP_TIME", "-1")
        with pytest.raises(SettingsError, match="SWITCHBOARD_STEP_TIME=-1"):
            load_settings({})
        monkeypatch.delenv("SWITCHBOARD_STEP_TIME")
        path = write_toml(tmp_path / "s.toml", "graceful_timeout = 0\n")
        with pytest.raises(SettingsError, match=f"{path}: graceful_timeout = 0"):
            load_settings({}, config_file=path)

    def test_old_flags_are_aliases(self) -> None:
        """--step-time, --per-token-cost and --graceful-timeout set the new settings."""
        import argparse

        from switchboard.supervisor.cli import add_parser

        parser = argparse.ArgumentParser()
        add_parser(parser.add_subparsers())
        words = ["up", "--step-time", "0.2", "--per-token-cost", "0", "--graceful-timeout", "3"]
        given = vars(parser.parse_args(words))
        assert given == {"config": None, "step_time_s": "0.2", "per_token_cost_s": "0",
                         "graceful_timeout_s": "3"}  # fmt: skip
        assert set(RENAMED.values()) <= set(StackSettings.model_fields)

    @pytest.mark.parametrize("old", ["workers", "detokenizers"])
    def test_old_outputs_via_values_mean_direct(
        self, old: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """outputs_via=workers (up's old value) and detokenizers are direct."""
        assert load_settings({"outputs_via": old}).outputs_via == "direct"
        monkeypatch.setenv("SWITCHBOARD_OUTPUTS_VIA", old)
        assert load_settings({}).outputs_via == "direct"
        assert "--outputs-via sideways" in TestErrors().refusal({"outputs_via": "sideways"})

    def test_child_defaults_come_from_the_children(self) -> None:
        """What up hands a child defaults to that child's own settings definition."""
        from app.settings import AdminSettings
        from switchboard.engine.scheduler import SchedulerConfig
        from switchboard.worker.settings import WorkerSettings

        settings = load_settings({})
        assert (settings.host, settings.port) == (WorkerSettings.host, WorkerSettings.port)
        assert settings.model_name == WorkerSettings.model_name
        assert settings.graceful_timeout_s == WorkerSettings.graceful_timeout_s
        assert settings.admin_port == AdminSettings.model_fields["port"].default
        for field in ("step_time_s", "per_token_cost_s"):
            assert getattr(settings, field) == getattr(SchedulerConfig, field)
        for field in ("max_running_requests", "max_tokens_per_step"):
            assert getattr(settings, field) == getattr(SchedulerConfig, field)


class TestOperatingDoc:
    """docs/operating.md stays true to the settings."""

    def test_every_setting_is_documented(self) -> None:
        """Each setting's TOML key, flag, variable and default appear in one table row."""
        doc = (Path(__file__).resolve().parents[4] / "docs" / "operating.md").read_text()
        rows = {line.split("|")[1].strip(" `"): line for line in doc.splitlines() if "| `" in line}
        for name, info in StackSettings.model_fields.items():
            row = rows.get(name)
            assert row is not None, f"{name} has no row in docs/operating.md"
            assert f"`{flag_name(name)}`" in row and f"`{env_name(name)}`" in row
            default = info.get_default()
            expected = str(default)
            if default is None or isinstance(default, bool):
                expected = "unset" if default is None else "on" if default else "off"
            assert f"| {expected} |" in row, f"{name}: default {expected} not in {row}"

    def test_old_names_are_listed(self) -> None:
        """Each renamed setting's row lists its old key, flag and variable."""
        doc = (Path(__file__).resolve().parents[4] / "docs" / "operating.md").read_text()
        rows = {line.split("|")[1].strip(" `"): line for line in doc.splitlines() if "| `" in line}
        for old, name in RENAMED.items():
            row = rows[name]
            for spelling in (f"`{old}`", f"`{flag_name(old)}`", f"`{env_name(old)}`"):
                assert spelling in row, f"{name}: {spelling} not in {row}"
