"""The roles of a stack across hosts: what each host runs, what it needs, its worker ids,
and the shared stack key its run directory is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from router_core.credentials import KEY_FILE, read_key
from switchboard.supervisor.gateway_settings import worker_id_prefix
from switchboard.supervisor.layout import stack_layout
from switchboard.supervisor.rundir import RunDirectory, write_key
from switchboard.supervisor.settings import SettingsError, load_settings
from switchboard.supervisor.supervise import Supervisor

GATEWAY = "tcp://127.0.0.1:7100"


def control_settings(tmp_path: Path, **more: str) -> dict[str, object]:
    return {
        "role": "control",
        "gateway_listen": GATEWAY,
        "curve_key_pair": tmp_path / "control.secret",
        "authorised_keys": tmp_path / "authorised",
        "stack_key_file": tmp_path / "stack.key",
        **more,
    }


def workers_settings(tmp_path: Path, **more: str) -> dict[str, object]:
    return {
        "role": "workers",
        "control": "127.0.0.1:7100",
        "curve_key_pair": tmp_path / "host-a.secret",
        "gateway_public_key": tmp_path / "control.public",
        "stack_key_file": tmp_path / "stack.key",
        **more,
    }


class TestControlRole:
    def test_everything_but_the_workers(self, tmp_path: Path) -> None:
        """Router, gateway, detokenizer router, detokenizers, engine and admin app."""
        settings = load_settings(control_settings(tmp_path, workers="3"))
        roles = [spec.role for spec in stack_layout(settings, tmp_path, 1)]
        assert "worker" not in roles
        assert set(roles) == {"router", "gateway", "detok-router", "detokenizer", "engine", "admin"}

    def test_needs_a_gateway_and_a_shared_key(self, tmp_path: Path) -> None:
        with pytest.raises(SettingsError, match="role control needs gateway_listen"):
            load_settings({"role": "control"})
        given = control_settings(tmp_path)
        del given["stack_key_file"]
        with pytest.raises(SettingsError, match="role control needs stack_key_file"):
            load_settings(given)


class TestWorkersRole:
    def test_only_workers_behind_the_gateway(self, tmp_path: Path) -> None:
        """Only HTTP workers, each with the gateway, the host's keys and the run dir's
        (copied) stack key, ready when it answers /health itself, no socket file here."""
        settings = load_settings(workers_settings(tmp_path, workers="2", worker_id_prefix="a-"))
        specs = stack_layout(settings, tmp_path, 1)
        assert [spec.name for spec in specs] == ["worker-a-0", "worker-a-1"]
        for spec in specs:
            argv = list(spec.argv)
            assert argv[argv.index("--gateway") + 1] == GATEWAY  # HOST:PORT becomes tcp://
            assert argv[argv.index("--curve-key-pair") + 1] == str(tmp_path / "host-a.secret")
            assert argv[argv.index("--gateway-public-key") + 1] == str(tmp_path / "control.public")
            assert argv[argv.index("--key-file") + 1] == str(tmp_path / KEY_FILE)
            assert "--admin-url" not in argv  # no admin app here unless one is named
            assert (spec.ready.kind, spec.ready.target) == ("worker-http", spec.worker_id)
            assert spec.socket_files == ()

    def test_the_control_admin_url_reaches_the_workers(self, tmp_path: Path) -> None:
        url = "http://169.254.20.1:8001"
        settings = load_settings(workers_settings(tmp_path, control_admin_url=url))
        argv = list(stack_layout(settings, tmp_path, 1)[0].argv)
        assert argv[argv.index("--admin-url") + 1] == url

    def test_needs_the_control_host_and_keys(self, tmp_path: Path) -> None:
        with pytest.raises(SettingsError, match="role workers needs control and curve_key_pair"):
            load_settings({"role": "workers"})
        given = workers_settings(tmp_path)
        del given["stack_key_file"]
        with pytest.raises(SettingsError, match="role workers needs stack_key_file"):
            load_settings(given)
        with pytest.raises(SettingsError, match="unset gateway_listen"):
            load_settings({**control_settings(tmp_path), **workers_settings(tmp_path)})

    def test_control_beyond_loopback_needs_allow_remote(self, tmp_path: Path) -> None:
        remote = workers_settings(tmp_path, control="169.254.20.1:7100")
        with pytest.raises(SettingsError, match=r"allow.remote|loopback"):
            load_settings(remote)
        assert load_settings({**remote, "allow_remote": "1"}).control == "tcp://169.254.20.1:7100"

    def test_a_bad_control_endpoint_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(SettingsError, match="tcp://HOST:PORT"):
            load_settings(workers_settings(tmp_path, control="ipc:///x"))

    def test_no_admin_tokens_needed_beyond_loopback(self, tmp_path: Path) -> None:
        """A worker host has no admin app: listening beyond loopback needs no token."""
        settings = workers_settings(tmp_path, host="0.0.0.0", allow_remote="1")
        assert load_settings(settings).host == "0.0.0.0"


class TestWorkerIds:
    @pytest.mark.parametrize(
        ("given", "role", "hostname", "expected"),
        [
            (None, "all", "box", "w"),
            (None, "workers", "pod-7f9c.cluster.local", "pod-7f9c-w"),
            (None, "workers", "weird host!", "weird-host-w"),
            (None, "workers", "...", "w"),
            ("gpu3-", "workers", "box", "gpu3-"),
        ],
    )
    def test_prefix(self, given: str | None, role: str, hostname: str, expected: str) -> None:
        settings = load_settings({"worker_id_prefix": given} if given else {})
        settings = settings.model_copy(update={"role": role})
        assert worker_id_prefix(settings, hostname) == expected

    def test_a_bad_prefix_is_refused(self) -> None:
        with pytest.raises(SettingsError, match="worker-id-prefix -bad: expected 1 to 48"):
            load_settings({"worker_id_prefix": "-bad"})


class TestSharedStackKey:
    def test_the_run_dir_holds_the_shared_key(self, tmp_path: Path) -> None:
        shared = tmp_path / "stack.key"
        write_key(shared, "k" * 40)
        run_dir = RunDirectory(tmp_path / "run", shared)
        path = run_dir.open()
        try:
            assert read_key(path / KEY_FILE) == "k" * 40
            assert (os.stat(path / KEY_FILE).st_mode & 0o777) == 0o600
        finally:
            run_dir.close(())
        assert shared.exists()  # closing removes the run dir's copy, never the source

    def test_an_unusable_key_file_is_a_settings_error(self, tmp_path: Path) -> None:
        shared = tmp_path / "stack.key"
        shared.write_text("k" * 40)
        shared.chmod(0o644)
        with pytest.raises(SettingsError, match="stack_key_file"):
            RunDirectory(tmp_path / "run", shared).open()
        with pytest.raises(SettingsError, match="no such file"):
            RunDirectory(tmp_path / "run", tmp_path / "missing").open()


class TestServingLine:
    def test_each_role_says_what_it_serves(self, tmp_path: Path) -> None:
        run_dir = RunDirectory(tmp_path / "run")
        run_dir.open()
        try:
            control = Supervisor(load_settings(control_settings(tmp_path)), run_dir)
            assert control.serving_line().startswith(
                f"switchboard: control host; workers join at {GATEWAY}"
            )
            workers = Supervisor(load_settings(workers_settings(tmp_path, workers="3")), run_dir)
            line = workers.serving_line()
            assert f"(3 workers of the stack at {GATEWAY})" in line
            assert "console" not in line
        finally:
            run_dir.close(())
