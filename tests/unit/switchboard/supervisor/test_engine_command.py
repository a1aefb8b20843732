"""A user's engine command (switchboard.supervisor.engine_command and its settings): the
placeholders, the variables, the refusals, and the engine child the layout makes of it
(docs/engine.md, "Your engine under switchboard up")."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from router_core.endpoints import EngineEndpoints
from switchboard.supervisor.engine_command import (
    ENV_NAMES,
    KEY_ENV,
    PLACEHOLDERS,
    EngineCommandError,
    EnginePlaces,
    check_command,
    engine_argv,
    engine_environment,
)
from switchboard.supervisor.engine_settings import engine_description
from switchboard.supervisor.layout import stack_layout
from switchboard.supervisor.settings import SettingsError, load_settings


def _places(run_dir: Path) -> EnginePlaces:
    return EnginePlaces(
        endpoints=EngineEndpoints.in_run_dir(run_dir),
        run_dir=run_dir,
        key_file=run_dir / "stack.key",
        vocab_file=run_dir / "vocab.msgpack",
        parent_pid=77,
    )


class TestPlaceholders:
    def test_each_placeholder_is_replaced_inside_words(self, tmp_path: Path) -> None:
        words = " ".join(f"--{name}={{{name}}}" for name in PLACEHOLDERS)
        argv = engine_argv(f"my-engine {words}", _places(tmp_path))
        values = _places(tmp_path).values()
        assert argv == ("my-engine", *(f"--{name}={values[name]}" for name in PLACEHOLDERS))
        assert values["inbound"] == f"ipc://{tmp_path}/engine"
        assert values["parent_pid"] == "77"

    def test_words_split_as_a_shell_splits_them_without_one(self, tmp_path: Path) -> None:
        argv = engine_argv("""node 'my engine.js' --name "a b" $HOME *""", _places(tmp_path))
        assert argv == ("node", "my engine.js", "--name", "a b", "$HOME", "*")

    def test_doubled_braces_are_literal(self, tmp_path: Path) -> None:
        argv = engine_argv("""python -c 'print({{"a": 1}})' {{inbound}}""", _places(tmp_path))
        assert argv == ("python", "-c", 'print({"a": 1})', "{inbound}")

    @pytest.mark.parametrize(
        ("command", "message"),
        [
            ("", "is empty"),
            ("   ", "is empty"),
            ("engine 'open", "cannot split into words"),
            ("engine {key}", "unknown placeholder {key}"),
            ("engine {Inbound}", "unknown placeholder {Inbound}"),
            ("engine {", "a lone '{'"),
            ("engine }x", "a lone '}'"),
        ],
    )
    def test_refused(self, command: str, message: str) -> None:
        with pytest.raises(
            EngineCommandError, match=message.replace("{", r"\{").replace("}", r"\}")
        ):
            check_command(command)

    def test_environment_carries_the_same_and_the_key(self, tmp_path: Path) -> None:
        places = _places(tmp_path)
        env = engine_environment(places, "k" * 64)
        assert {env[ENV_NAMES[name]] for name in PLACEHOLDERS} == set(places.values().values())
        assert env["SWITCHBOARD_ENGINE_EVENTS"] == f"ipc://{tmp_path}/router-engine-events"
        assert env[KEY_ENV] == "k" * 64


class TestSettings:
    def test_a_command_implies_the_command_engine(self) -> None:
        settings = load_settings({"engine_command": "./my-engine --fast"})
        assert settings.engine == "command"
        assert engine_description(settings) == "engine command my-engine"

    def test_toml_table_and_json_flag(self, tmp_path: Path) -> None:
        config = tmp_path / "s.toml"
        config.write_text('engine_command = "e"\nengine_cwd = "~/x"\n[engine_env]\nA = "1"\n')
        settings = load_settings({}, config_file=config)
        assert settings.engine_env == {"A": "1"}
        assert settings.engine_cwd == Path("~/x").expanduser()
        flagged = load_settings({"engine_command": "e", "engine_env": json.dumps({"B": "2"})})
        assert flagged.engine_env == {"B": "2"}

    def test_environment_variable_is_json(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("SWITCHBOARD_ENGINE_COMMAND", "e")
        monkeypatch.setenv("SWITCHBOARD_ENGINE_ENV", '{"C": "3"}')
        assert load_settings({}).engine_env == {"C": "3"}

    @pytest.mark.parametrize(
        ("given", "message"),
        [
            ({"engine": "command"}, "needs engine_command"),
            ({"engine": "llama-cpp", "model": "m.gguf", "engine_command": "e"}, "not for engine"),
            ({"engine_command": "e", "max_waiting_requests": "5"}, "only for engines sim"),
            ({"engine_command": "e", "threads": "2"}, "only for engines sim"),
            ({"engine_cwd": "/tmp"}, "only for an engine command"),
            ({"engine_command": "e", "engine_env": '{"1A": "x"}'}, "not a variable name"),
            (
                {"engine_command": "e", "engine_env": '{"SWITCHBOARD_ENGINE_INBOUND": "x"}'},
                "set by",
            ),
            ({"engine_command": "e", "engine_env": "[1]"}, r"--engine-env \[1\]: .*dictionary"),
        ],
    )
    def test_refused(self, given: dict[str, str], message: str) -> None:
        with pytest.raises(SettingsError, match=message):
            load_settings(given)


class TestLayout:
    def test_the_engine_child_runs_the_command_through_engine_exec(self, tmp_path: Path) -> None:
        settings = load_settings(
            {
                "engine_command": "node e.js {inbound}",
                "engine_cwd": "/srv",
                "engine_env": '{"A": "1"}',
            }
        )
        spec = next(
            s for s in stack_layout(settings, tmp_path, 4242, key="K") if s.name == "engine"
        )
        assert spec.argv == (
            sys.executable, "-P", "-m", "switchboard.supervisor.engine_exec", "4242", "--",
            "node", "e.js", f"ipc://{tmp_path}/engine",
        )  # fmt: skip
        assert spec.cwd == Path("/srv")
        assert spec.command == "node e.js {inbound}"
        assert spec.env["A"] == "1" and spec.env[KEY_ENV] == "K"
        assert spec.env["SWITCHBOARD_VOCAB_FILE"] == str(tmp_path / "vocab.msgpack")
        assert spec.state_files == (tmp_path / "vocab.msgpack",)
        assert spec.socket_files == (tmp_path / "engine",)
        assert spec.ready.kind == "engine"

    def test_the_built_in_engine_has_no_command(self, tmp_path: Path) -> None:
        spec = next(s for s in stack_layout(load_settings({}), tmp_path, 1) if s.name == "engine")
        assert spec.command is None and spec.cwd is None
        assert KEY_ENV not in spec.env


EXEC = (sys.executable, "-m", "switchboard.supervisor.engine_exec")


class TestEngineExec:
    def test_a_program_that_cannot_run_is_named_with_status_127(self) -> None:
        import subprocess

        done = subprocess.run(
            [*EXEC, str(os.getpid()), "--", "/no/such/engine", "--flag"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 127
        assert "cannot run the engine command '/no/such/engine': No such file" in done.stderr

    def test_an_orphan_does_not_start(self) -> None:
        import subprocess

        done = subprocess.run(
            [*EXEC, "1", "--", "true"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 1 and "supervisor 1 is gone" in done.stderr


class TestSecondRead:
    def test_an_explicit_sim_with_a_command_is_refused(self) -> None:
        with pytest.raises(SettingsError, match="engine_command: not for engine sim"):
            load_settings({"engine": "sim", "engine_command": "e"})

    def test_an_environment_value_must_be_text(self) -> None:
        with pytest.raises(SettingsError, match="A: the value must be a string, not 1"):
            load_settings({"engine_command": "e", "engine_env": '{"A": 1}'})

    def test_a_program_under_a_placeholder_is_checked_at_start(self) -> None:
        from switchboard.supervisor.preflight import check_engine_command

        check_engine_command("{run_dir}/my-engine --x", None, {})  # no refusal
        with pytest.raises(SettingsError, match="not an executable file"):
            check_engine_command("./no/such/engine", None, {})
