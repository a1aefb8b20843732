"""The HTTP limit settings on every path: the worker's settings and flags, the admin app's
settings and variables, and ``switchboard up``'s settings handed to both children."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.settings import AdminSettings
from switchboard.cli.flags import add_settings_flags, settings_values
from switchboard.supervisor.layout import stack_layout
from switchboard.supervisor.settings import SettingsError, load_settings
from switchboard.worker.settings import WorkerSettings

ENDPOINT = "ipc:///tmp/sb-limits/router-control"


def flag_values(argv: list[str], flag: str) -> str:
    """The value of ``flag`` on ``argv`` (``--flag value`` or ``--flag=value``)."""
    for index, argument in enumerate(argv):
        if argument == flag:
            return argv[index + 1]
        if argument.startswith(flag + "="):
            return argument.partition("=")[2]
    raise AssertionError(f"{flag} not in {argv}")


class TestWorkerSettings:
    """The worker's limits: flags generated from its settings, checked there."""

    def test_flags_set_the_limits(self) -> None:
        """--max-header-bytes .. --allowed-hosts become the worker's HttpLimits."""
        parser = argparse.ArgumentParser()
        add_settings_flags(parser, WorkerSettings)
        args = parser.parse_args(
            [
                *("--worker-id", "w0", "--max-header-bytes", "1024"),
                *("--header-timeout-s", "1.5", "--body-timeout-s", "2", "--keep-alive-s", "3"),
                *("--max-connections", "9", "--allowed-hosts", "api.example"),
            ]
        )
        values = settings_values(args, WorkerSettings)
        assert values["allowed_hosts"] == "api.example"
        limits = WorkerSettings(link=None, **values).http_limits  # type: ignore[arg-type]
        assert (limits.max_header_bytes, limits.max_connections) == (1024, 9)
        assert (limits.header_timeout_s, limits.body_timeout_s, limits.keep_alive_s) == (
            1.5,
            2.0,
            3.0,
        )

    def test_defaults(self) -> None:
        """64 KiB heads, 10 s head, 30 s body, 10 s idle, 1024 connections, no extra hosts."""
        limits = WorkerSettings(worker_id="w0", link=None).http_limits  # type: ignore[arg-type]
        assert (limits.max_header_bytes, limits.header_timeout_s, limits.body_timeout_s) == (
            65536,
            10.0,
            30.0,
        )
        assert (limits.keep_alive_s, limits.max_connections) == (10.0, 1024)

    @pytest.mark.parametrize(
        ("given", "match"),
        [({"allowed_hosts": "a.example:80"}, "allowed_hosts"), ({"max_connections": 0}, "max_c")],
    )
    def test_bad_values_are_refused(self, given: dict[str, object], match: str) -> None:
        """A host with a port, or a limit below 1, is a ValueError naming the setting."""
        with pytest.raises(ValueError, match=match):
            WorkerSettings(worker_id="w0", link=None, **given)  # type: ignore[arg-type]


class TestAdminSettings:
    """The admin app's limits, from its settings and SWITCHBOARD_ADMIN_ variables."""

    def test_defaults(self) -> None:
        """The admin app holds 512 connections and keeps idle ones 5 s."""
        limits = AdminSettings(control_endpoint=ENDPOINT).http_limits
        assert (limits.max_connections, limits.keep_alive_s, limits.max_header_bytes) == (
            512,
            5.0,
            65536,
        )

    def test_the_environment_sets_them(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """SWITCHBOARD_ADMIN_MAX_CONNECTIONS and _ALLOWED_HOSTS reach the settings."""
        monkeypatch.setenv("SWITCHBOARD_ADMIN_MAX_CONNECTIONS", "64")
        monkeypatch.setenv("SWITCHBOARD_ADMIN_ALLOWED_HOSTS", "ops.example")
        settings = AdminSettings(control_endpoint=ENDPOINT)
        assert (settings.http_limits.max_connections, settings.allowed_hosts) == (64, "ops.example")

    def test_a_bad_host_list_is_refused(self) -> None:
        """An allowed_hosts entry with a scheme is refused, naming it."""
        with pytest.raises(ValueError, match="http://x"):
            AdminSettings(control_endpoint=ENDPOINT, allowed_hosts="http://x")


class TestStackSettings:
    """switchboard up's limits reach both HTTP children."""

    def test_defaults_reach_workers_and_admin(self, tmp_path: Path) -> None:
        """Workers get 1024 connections, the admin app 512; the rest is the same."""
        layout = stack_layout(load_settings({}), tmp_path, 1)
        specs = {spec.role: list(spec.argv) for spec in layout}
        assert flag_values(specs["worker"], "--max-connections") == "1024"
        assert flag_values(specs["admin"], "--max-connections") == "512"
        for role in ("worker", "admin"):
            assert flag_values(specs[role], "--max-header-bytes") == "65536"
            assert flag_values(specs[role], "--keep-alive-s") == "10.0"
            assert flag_values(specs[role], "--allowed-hosts") == ""

    def test_given_values_reach_them(self, tmp_path: Path) -> None:
        """Each setting given to up is the children's flag."""
        settings = load_settings(
            {
                "header_timeout_s": "4",
                "body_timeout_s": "5",
                "max_connections": "100",
                "admin_max_connections": "20",
                "allowed_hosts": "api.example,10.1.2.3",
            }
        )
        specs = {spec.role: list(spec.argv) for spec in stack_layout(settings, tmp_path, 1)}
        assert flag_values(specs["worker"], "--max-connections") == "100"
        assert flag_values(specs["admin"], "--max-connections") == "20"
        for role in ("worker", "admin"):
            assert flag_values(specs[role], "--header-timeout-s") == "4.0"
            assert flag_values(specs[role], "--body-timeout-s") == "5.0"
            assert flag_values(specs[role], "--allowed-hosts") == "api.example,10.1.2.3"

    def test_body_and_stream_limits_reach_them(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Body limits per child and the admin app's event-stream limit are up's settings,
        its SWITCHBOARD_ADMIN_ variables included, with the children's own defaults."""
        defaults = {
            spec.role: list(spec.argv) for spec in stack_layout(load_settings({}), tmp_path, 1)
        }
        assert flag_values(defaults["worker"], "--max-body-bytes") == str(16 * 1024 * 1024)
        assert flag_values(defaults["admin"], "--max-body-bytes") == str(1024 * 1024)
        assert flag_values(defaults["admin"], "--max-subscribers") == "256"
        assert "--max-subscribers" not in defaults["worker"]
        monkeypatch.setenv("SWITCHBOARD_ADMIN_MAX_BODY_BYTES", "512")
        monkeypatch.setenv("SWITCHBOARD_ADMIN_MAX_SUBSCRIBERS", "8")
        settings = load_settings({"max_body_bytes": "2048"})
        specs = {spec.role: list(spec.argv) for spec in stack_layout(settings, tmp_path, 1)}
        assert flag_values(specs["worker"], "--max-body-bytes") == "2048"
        assert flag_values(specs["admin"], "--max-body-bytes") == "512"
        assert flag_values(specs["admin"], "--max-subscribers") == "8"

    def test_a_bad_host_list_is_one_line(self) -> None:
        """A bad allowed_hosts is a SettingsError naming the setting and the entry."""
        with pytest.raises(SettingsError, match=r"allowed_hosts.*'a\.example:80'"):
            load_settings({"allowed_hosts": "a.example:80"})
