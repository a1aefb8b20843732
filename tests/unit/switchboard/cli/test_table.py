"""The ``switchboard`` command table: each subcommand registered once, built lazily, its
flags and defaults taken from its process's settings, old spellings kept as aliases."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from router_core.detokenizer_router.settings import DetokenizerRouterSettings
from router_core.endpoints import (
    DETOK_ROUTER_STATE_FILE,
    ROUTER_STATE_FILE,
    DetokenizerRouterEndpoints,
    RouterEndpoints,
)
from router_core.limits import DEFAULT_BACKLOG, DEFAULT_HWM
from router_core.settings_fields import flag_specs
from router_core.tokenizer_router.settings import RouterSettings
from router_core.worker_link import WorkerLinkSettings
from switchboard import __version__
from switchboard.cli import ADMIN_COMMANDS, COMMAND_GROUPS, SUBCOMMANDS, build_parser, main
from switchboard.detokenizer.settings import DetokenizerSettings
from switchboard.engine.scheduler import SchedulerConfig
from switchboard.worker.settings import WorkerSettings

REPO = Path(__file__).resolve().parents[4]


def parse(*words: str) -> argparse.Namespace:
    """``words`` parsed as :func:`main` parses them (only that command's parser built)."""
    return build_parser(words[0]).parse_args(list(words))


def choices(parser: argparse.ArgumentParser) -> set[str]:
    """The subcommand names ``parser`` accepts."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    raise AssertionError("no subcommands")


class TestTable:
    """Every subcommand once, each module with its parser and its run function."""

    def test_every_subcommand_is_registered_once(self) -> None:
        """The full parser has exactly the table's commands and the groups' commands."""
        assert not set(SUBCOMMANDS) & ADMIN_COMMANDS
        assert choices(build_parser()) == set(SUBCOMMANDS) | ADMIN_COMMANDS

    def test_each_module_exports_a_parser_and_a_run_function(self) -> None:
        """A table module has add_parser and run; a group module add_parsers and run."""
        for entry in SUBCOMMANDS.values():
            module = importlib.import_module(entry.module)
            assert callable(module.add_parser) and callable(module.run), entry.module
        for name in COMMAND_GROUPS:
            module = importlib.import_module(name)
            assert callable(module.add_parsers) and callable(module.run), name

    @pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
    def test_a_command_builds_only_its_own_parser(self, command: str) -> None:
        """Naming a command builds that one parser alone."""
        assert choices(build_parser(command)) == {command}

    def test_an_operator_command_builds_its_group(self) -> None:
        """Naming an operator command builds the operator commands' parsers."""
        assert choices(build_parser(sorted(ADMIN_COMMANDS)[0])) == ADMIN_COMMANDS

    @pytest.mark.parametrize("command", sorted(set(SUBCOMMANDS) | ADMIN_COMMANDS))
    def test_help_works_for_each(self, command: str, capsys: pytest.CaptureFixture[str]) -> None:
        """``switchboard <command> --help`` prints its usage and exits 0."""
        with pytest.raises(SystemExit) as caught:
            main([command, "--help"])
        assert caught.value.code == 0
        assert f"usage: switchboard {command}" in capsys.readouterr().out

    def test_without_up_flags_up_is_a_stub(self) -> None:
        """with_up_flags=False still lists up, with none of its generated flags."""
        parser = build_parser(with_up_flags=False)
        assert "up" in choices(parser)
        with pytest.raises(SystemExit):
            parser.parse_args(["up", "--workers", "3"])

    def test_a_usage_error_is_one_line_and_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A bad setting found after parsing: ``switchboard <command>: <message>``, 2."""
        assert main(["router", "--run-dir", str(tmp_path / "absent")]) == 2
        lines = capsys.readouterr().err.splitlines()
        assert lines == [f"switchboard router: --run-dir {tmp_path / 'absent'}: not a directory"]

    def test_module_entry_point_runs_main(self) -> None:
        """``python -m switchboard.cli`` is the command (how the supervisor starts children)."""
        done = subprocess.run(
            [sys.executable, "-m", "switchboard.cli", "router", "--run-dir", "/absent/dir"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=60,
            check=False,
        )
        assert done.returncode == 2
        assert done.stderr == "switchboard router: --run-dir /absent/dir: not a directory\n"

    @pytest.mark.parametrize(
        "command",
        ["router", "detok-router", "engine", "detokenizer", "worker", "ctl", "status"],
    )
    def test_process_commands_load_nothing_heavy(self, command: str) -> None:
        """A command's --help loads neither pydantic, FastAPI, uvicorn nor the supervisor."""
        probe = (
            "import sys\n"
            "from switchboard.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = ('pydantic', 'fastapi', 'uvicorn', 'switchboard.supervisor')\n"
            "print(sorted(name for name in heavy if name in sys.modules))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe, command, "--help"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=60,
            check=False,
        )
        assert done.stdout.splitlines()[-1] == "[]", done.stderr


#: (command line before the flag, old flag, new flag, value, the value parsed).
ALIASES = [
    (["router"], "--heartbeat-interval", "--heartbeat-interval-s", "0.5", 0.5),
    (["router"], "--heartbeat-timeout", "--heartbeat-timeout-s", "7", 7.0),
    (["router"], "--barrier-timeout", "--barrier-timeout-s", "2", 2.0),
    (["router"], "--engine-timeout", "--engine-timeout-s", "3", 3.0),
    (["engine"], "--step-time", "--step-time-s", "0.02", 0.02),
    (["engine"], "--per-token-cost", "--per-token-cost-s", "0.001", 0.001),
    (["engine"], "--load-interval", "--load-interval-s", "0.5", 0.5),
    (["detokenizer"], "--state-ttl", "--state-ttl-s", "60", 60.0),
    (["worker", "--worker-id", "w0"], "--graceful-timeout", "--graceful-timeout-s", "4", 4.0),
    (["worker", "--worker-id", "w0"], "--retry-after", "--retry-after-s", "9", 9),
    (["admin"], "--poll-interval", "--poll-interval-s", "1.5", 1.5),
    (["ctl", "--endpoint", "ipc:///x", "status"], "--timeout", "--timeout-s", "2", 2.0),
]


class TestAliases:
    """Each old spelling sets the same destination to the same value as the new one."""

    @pytest.mark.parametrize(("before", "old", "new", "text", "value"), ALIASES)
    def test_old_flag_is_an_alias(
        self, before: list[str], old: str, new: str, text: str, value: object
    ) -> None:
        """``old`` and ``new`` parse to one destination, named like the new flag."""
        dest = new.removeprefix("--").replace("-", "_")
        by_old, by_new = parse(*before, old, text), parse(*before, new, text)
        assert getattr(by_old, dest) == getattr(by_new, dest) == value
        assert vars(by_old) == vars(by_new)

    @pytest.mark.parametrize(
        ("command", "old"), [("engine", "detokenizers"), ("detokenizer", "workers")]
    )
    def test_old_outputs_via_values_mean_direct(self, command: str, old: str) -> None:
        """The engine's old ``detokenizers`` and the detokenizer's ``workers`` are direct."""
        assert parse(command).outputs_via == "direct"
        assert parse(command, "--outputs-via", old).outputs_via == "direct"
        assert parse(command, "--outputs-via", "router").outputs_via == "router"

    def test_every_duration_flag_ends_in_s(self) -> None:
        """No process flag takes seconds under a name without the -s suffix (old aliases
        aside), so the convention cannot drift back."""
        old = {alias for _, alias, _, _, _ in ALIASES}
        for command in SUBCOMMANDS:
            parser = _subparser(command)
            for action in parser._actions:
                if action.dest.endswith("_s"):
                    assert action.option_strings[0].endswith("-s"), (command, action.dest)
                    assert set(action.option_strings[1:]) <= old, (command, action.dest)


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[command]
            return found
    raise AssertionError(command)


def _field_defaults(settings_class: type) -> dict[str, Any]:
    return {
        field.name: field.default
        for field, _ in flag_specs(settings_class)
        if field.default is not dataclasses.MISSING
    }


def _signature_default(function: Any, name: str) -> Any:
    return inspect.signature(function).parameters[name].default


class TestDefaults:
    """A parser's defaults are its settings definition's defaults (written once)."""

    @pytest.mark.parametrize(
        ("words", "settings_class"),
        [
            (["router"], RouterSettings),
            (["detok-router"], DetokenizerRouterSettings),
            (["detokenizer"], DetokenizerSettings),
            (["engine"], SchedulerConfig),
            (["worker", "--worker-id", "w0"], WorkerSettings),
        ],
    )
    def test_flags_default_to_the_settings(self, words: list[str], settings_class: type) -> None:
        """Each flagged field's flag defaults to the field's default."""
        args = vars(parse(*words))
        defaults = _field_defaults(settings_class)
        assert defaults, settings_class
        assert {name: args[name] for name in defaults} == defaults

    @pytest.mark.parametrize("command", ["router", "detok-router", "detokenizer", "engine"])
    def test_queue_limits_default_to_one_definition(self, command: str) -> None:
        """--hwm and --backlog default to DEFAULT_HWM and DEFAULT_BACKLOG, as every
        settings class and link does."""
        args = parse(command)
        assert (args.hwm, args.backlog) == (DEFAULT_HWM, DEFAULT_BACKLOG)
        from router_core.engine_link import EngineLink

        for settings_class in (RouterSettings, DetokenizerRouterSettings, DetokenizerSettings):
            fields = {field.name: field.default for field in dataclasses.fields(settings_class)}
            assert (fields["hwm"], fields["backlog_limit"]) == (DEFAULT_HWM, DEFAULT_BACKLOG)
        assert _signature_default(EngineLink.__init__, "backlog_limit") == DEFAULT_BACKLOG

    def test_engine_and_admin_defaults(self) -> None:
        """The engine's load interval and the admin app's flags default to their owners'."""
        from app.settings import AdminSettings
        from switchboard.engine.engine import BuiltinEngine

        engine = parse("engine")
        assert engine.load_interval_s == _signature_default(BuiltinEngine, "load_interval_s")
        admin = parse("admin")
        fields = AdminSettings.model_fields
        assert admin.host == fields["host"].default and admin.port == fields["port"].default
        assert admin.poll_interval_s == fields["poll_interval_s"].default

    def test_bare_command_lines_give_the_default_settings(self, tmp_path: Path) -> None:
        """``--run-dir`` alone gives each process exactly its settings' defaults (and the
        run directory's stack key, made by the first of them)."""
        import dataclasses

        from router_core.credentials import KEY_FILE, read_key
        from switchboard.cli import detok_router, router
        from switchboard.worker import cli as worker_cli

        run_dir = str(tmp_path)
        made = router.settings(parse("router", "--run-dir", run_dir))
        key = read_key(tmp_path / KEY_FILE)
        assert made == RouterSettings(
            endpoints=RouterEndpoints.in_run_dir(run_dir),
            state_file=str(tmp_path / ROUTER_STATE_FILE),
            key=key,
        )
        assert detok_router.settings(
            parse("detok-router", "--run-dir", run_dir)
        ) == DetokenizerRouterSettings(
            endpoints=DetokenizerRouterEndpoints.in_run_dir(run_dir, 1),
            state_file=str(tmp_path / DETOK_ROUTER_STATE_FILE),
            router_workers=RouterEndpoints.in_run_dir(run_dir).workers,  # its beacon's
            key=key,
        )
        worker = worker_cli.settings(parse("worker", "--run-dir", run_dir, "--worker-id", "w0"))
        assert worker == WorkerSettings(
            worker_id="w0",
            link=dataclasses.replace(WorkerLinkSettings.in_run_dir(run_dir, "w0"), key=key),
            version=__version__,
        )
