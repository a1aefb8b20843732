"""The stack layout: the children, their order, arguments, socket files and environment,
the admin app among them."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchboard.supervisor.admin import admin_access
from switchboard.supervisor.layout import START_GROUPS, admin_url, child_environment, stack_layout
from switchboard.supervisor.settings import SettingsError, load_settings


class TestLayout:
    """The children, their order, arguments and socket files."""

    def test_roles_in_start_order(self, tmp_path: Path) -> None:
        """Router, detok router, M detokenizers, engine, N workers w0..w{N-1}, admin app."""
        settings = load_settings({"workers": "3", "detokenizers": "2"})
        names = [spec.name for spec in stack_layout(settings, tmp_path, 42)]
        assert names == [
            "router", "detok-router", "detokenizer-0", "detokenizer-1", "engine",
            "worker-w0", "worker-w1", "worker-w2", "admin",
        ]  # fmt: skip

    def test_every_child_dies_with_the_supervisor(self, tmp_path: Path) -> None:
        """Each child is given --parent-pid, --run-dir and the log level."""
        settings = load_settings({"log_level": "warning"})
        for spec in stack_layout(settings, tmp_path, 4242):
            argv = list(spec.argv)
            assert argv[argv.index("--parent-pid") + 1] == "4242"
            assert argv[argv.index("--run-dir") + 1] == str(tmp_path)
            assert argv[argv.index("--log-level") + 1] == "WARNING"

    def test_settings_reach_their_children(self, tmp_path: Path) -> None:
        """Engine, detokenizer and worker settings appear on the right command lines."""
        settings = load_settings(
            {"step_time_s": "0.05", "outputs_via": "router", "port": "9100", "tokenizer": "/t.json"}
        )
        specs = {spec.name: list(spec.argv) for spec in stack_layout(settings, tmp_path, 1)}
        assert specs["engine"][specs["engine"].index("--step-time-s") + 1] == "0.05"
        detok = specs["detokenizer-1"]
        assert detok[detok.index("--outputs-via") + 1] == "router"
        assert detok[detok.index("--index") + 1] == "1"
        worker = specs["worker-w1"]
        assert worker[worker.index("--worker-id") + 1] == "w1"
        assert worker[worker.index("--port") + 1] == "9100"
        tokenized = [name for name in specs if "router" not in name and name != "admin"]
        assert all("--tokenizer" in specs[name] for name in tokenized)

    def test_every_child_command_line_parses(self, tmp_path: Path) -> None:
        """Each child's argv is accepted by that subcommand's own parser, in new spellings."""
        from switchboard.cli import build_parser

        settings = load_settings({"step_time_s": "0.05", "graceful_timeout_s": "3"})
        for spec in stack_layout(settings, tmp_path, 1):
            words = list(spec.argv[3:])  # after: python -m switchboard.cli
            args = build_parser(words[0]).parse_args(words)
            assert args.command == spec.role
            if spec.role == "engine":
                assert (args.step_time_s, args.outputs_via) == (0.05, "direct")
            if spec.role == "worker":
                assert args.graceful_timeout_s == 3.0
        old = {"--step-time", "--per-token-cost", "--graceful-timeout", "detokenizers"}
        words = {word for spec in stack_layout(settings, tmp_path, 1) for word in spec.argv}
        assert not old & words

    def test_socket_files_are_in_the_run_dir(self, tmp_path: Path) -> None:
        """Every socket file a child binds lies in the run directory."""
        specs = stack_layout(load_settings({}), tmp_path, 1)
        files = [path for spec in specs for path in spec.socket_files]
        assert len(files) == len(set(files)) == 5 + 2 + 2 + 1 + 2
        assert all(path.parent == tmp_path for path in files)

    def test_child_environment_drops_stack_settings(self) -> None:
        """Children do not inherit SWITCHBOARD_ settings variables, but keep foreign ones."""
        env = child_environment(
            {"SWITCHBOARD_PORT": "1", "SWITCHBOARD_CACHE_DIR": "/c", "PATH": "/bin"}
        )
        assert env["SWITCHBOARD_CACHE_DIR"] == "/c" and env["PATH"] == "/bin"
        assert "SWITCHBOARD_PORT" not in env and env["PYTHONUNBUFFERED"] == "1"


class TestAdminChild:
    """The admin app as a child of the stack."""

    def test_admin_child(self, tmp_path: Path) -> None:
        """switchboard admin on host:admin_port, ready on /healthz, tokens in its env only."""
        secret = "s3cretAdminT0ken"
        settings = load_settings({"admin_port": "9101", "admin_operator_tokens": f"ops:{secret}"})
        env = admin_access(settings).environment()
        admin = {spec.name: spec for spec in stack_layout(settings, tmp_path, 7, env)}["admin"]
        argv = list(admin.argv)
        assert argv[argv.index("admin") - 1] == "switchboard.cli"
        assert argv[argv.index("--port") + 1] == "9101"
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert (admin.ready.kind, admin.ready.target) == ("http", "http://127.0.0.1:9101/healthz")
        assert admin.env == env and not any(secret in part for part in argv)
        assert secret not in repr(admin) and admin.socket_files == ()
        detok = argv[argv.index("--detok-control-endpoint") + 1]
        assert detok == f"ipc://{tmp_path}/detok-router-control"

    def test_starts_after_the_router_and_stops_first(self) -> None:
        """The admin app starts with the detokenizer router, once the router is ready."""
        assert START_GROUPS[0] == ("router",) and "admin" in START_GROUPS[1]
        roles = [role for group in START_GROUPS for role in group]
        assert sorted(roles) == sorted(
            ["router", "gateway", "detok-router", "admin", "detokenizer", "engine", "worker"]
        )

    def test_wildcard_host_shows_loopback(self) -> None:
        """A wildcard host's console URL is its loopback address."""
        settings = load_settings(
            {
                "host": "0.0.0.0",
                "allow_remote": True,
                "admin_operator_tokens": "ops:remote-t0ken-of-24-chars",
            }
        )
        assert admin_url(settings) == "http://127.0.0.1:8001"


class TestGatewayChild:
    def test_none_without_gateway_listen(self, tmp_path: Path) -> None:
        """A one-host stack has no gateway."""
        assert "gateway" not in {spec.role for spec in stack_layout(load_settings({}), tmp_path, 1)}

    def test_gateway_after_the_router_with_its_keys(self, tmp_path: Path) -> None:
        """With gateway_listen the gateway starts once the router is ready, with its keys,
        ready when its port accepts connections."""
        settings = load_settings(
            {
                "gateway_listen": "tcp://127.0.0.1:7100",
                "curve_key_pair": tmp_path / "control.secret",
                "authorised_keys": tmp_path / "authorised",
            }
        )
        gateway = {spec.role: spec for spec in stack_layout(settings, tmp_path, 1)}["gateway"]
        argv = list(gateway.argv)
        assert argv[argv.index("--listen") + 1] == "tcp://127.0.0.1:7100"
        assert argv[argv.index("--curve-key-pair") + 1] == str(tmp_path / "control.secret")
        assert argv[argv.index("--authorised-keys") + 1] == str(tmp_path / "authorised")
        assert "--allow-remote" not in argv
        assert (gateway.ready.kind, gateway.ready.target) == ("tcp", "tcp://127.0.0.1:7100")
        assert "gateway" in START_GROUPS[1]

    def test_refusals(self, tmp_path: Path) -> None:
        """No keys, a non-tcp endpoint, or a host beyond loopback without allow_remote."""
        keys = {"curve_key_pair": tmp_path / "k", "authorised_keys": tmp_path / "a"}
        with pytest.raises(SettingsError, match="needs curve_key_pair and authorised_keys"):
            load_settings({"gateway_listen": "tcp://127.0.0.1:7100"})
        with pytest.raises(SettingsError, match="tcp://HOST:PORT"):
            load_settings({"gateway_listen": "ipc:///x", **keys})
        with pytest.raises(SettingsError, match=r"allow-remote|allow_remote|loopback"):
            load_settings({"gateway_listen": "tcp://169.254.10.1:7100", **keys})
