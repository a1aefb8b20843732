"""The engine part of the stack settings (switchboard.supervisor.engine_settings): the
TOML, environment and flag forms of ``engine = "llama-cpp"``, the refusals that keep one
backend's settings from being silently ignored by the other, and what the engine, the
workers and the detokenizers are handed (docs/engine.md, section 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchboard.engine.llama_cpp.config import LlamaConfig
from switchboard.supervisor.engine_settings import (
    engine_description,
    engine_flags,
    served_model_name,
    served_tokenizer,
)
from switchboard.supervisor.layout import stack_layout
from switchboard.supervisor.settings import SettingsError, StackSettings, load_settings


def _argv(settings: StackSettings, run_dir: Path, role: str) -> list[str]:
    return next(list(spec.argv) for spec in stack_layout(settings, run_dir, 1) if spec.name == role)


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


class TestTheLlamaEngineFromEachLayer:
    def test_the_toml_form_equals_the_flags(self, tmp_path: Path) -> None:
        """`engine`, `model` and the four llama settings read the same from a TOML file
        as from flags, and reach the engine's command line."""
        config = tmp_path / "stack.toml"
        config.write_text(
            'engine = "llama-cpp"\nmodel = "/models/m.gguf"\ncontext_size = 2048\n'
            "batch_size = 256\nsequences = 16\nthreads = 2\n",
            encoding="utf-8",
        )
        from_toml = load_settings({}, config_file=config)
        from_flags = load_settings(
            {
                "engine": "llama-cpp",
                "model": "/models/m.gguf",
                "context_size": "2048",
                "batch_size": "256",
                "sequences": "16",
                "threads": "2",
            }
        )
        assert engine_flags(from_toml) == engine_flags(from_flags)
        argv = _argv(from_toml, tmp_path, "engine")
        assert _value(argv, "--backend") == "llama-cpp"
        assert _value(argv, "--model") == "/models/m.gguf"
        assert [_value(argv, f) for f in ("--context-size", "--batch-size")] == ["2048", "256"]
        assert [_value(argv, f) for f in ("--sequences", "--threads")] == ["16", "2"]
        assert "--step-time-s" not in argv  # the simulation's settings stay off

    def test_the_environment_form(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("SWITCHBOARD_ENGINE", "llama-cpp")
        monkeypatch.setenv("SWITCHBOARD_MODEL", "~/m.gguf")
        settings = load_settings({})
        assert settings.model == Path.home() / "m.gguf"  # ~ expanded
        assert settings.origin("engine") == "SWITCHBOARD_ENGINE=llama-cpp"

    def test_a_home_relative_path_is_expanded_in_every_layer(self, tmp_path: Path) -> None:
        """``~`` in a TOML or flag ``model`` or ``tokenizer`` is the home directory."""
        config = tmp_path / "stack.toml"
        config.write_text('engine = "llama-cpp"\nmodel = "~/m.gguf"\n', encoding="utf-8")
        assert load_settings({}, config_file=config).model == Path.home() / "m.gguf"
        assert load_settings({"tokenizer": "~/t.json"}).tokenizer == Path.home() / "t.json"

    def test_llama_defaults_are_the_engines_own(self) -> None:
        """Unset, the four llama settings are LlamaConfig's defaults (one definition)."""
        settings = load_settings({"engine": "llama-cpp", "model": "/m.gguf"})
        assert (settings.context_size, settings.batch_size) == (
            LlamaConfig.context_size,
            LlamaConfig.batch_size,
        )
        assert (settings.sequences, settings.threads) == (LlamaConfig.sequences, 0)


class TestWhatTheOtherProcessesGet:
    def test_workers_and_detokenizers_tokenize_with_the_model(self, tmp_path: Path) -> None:
        settings = load_settings({"engine": "llama-cpp", "model": "/models/qwen.gguf"})
        assert served_tokenizer(settings) == Path("/models/qwen.gguf")
        for role in ("worker-w0", "detokenizer-0"):
            assert _value(_argv(settings, tmp_path, role), "--tokenizer") == "/models/qwen.gguf"

    def test_the_served_name_is_the_files_unless_named(self) -> None:
        settings = load_settings({"engine": "llama-cpp", "model": "/models/qwen.gguf"})
        assert served_model_name(settings, "switchboard-sim", "switchboard-sim") == "qwen"
        assert served_model_name(settings, "mine", "switchboard-sim") == "mine"
        assert engine_description(settings) == "llama-cpp engine serving qwen.gguf"

    def test_the_simulation_is_the_default(self, tmp_path: Path) -> None:
        settings = load_settings({})
        assert settings.engine == "sim" and served_tokenizer(settings) is None
        assert "--backend" not in _argv(settings, tmp_path, "engine")
        assert engine_description(settings) == "built-in engine"


class TestRefusals:
    @pytest.mark.parametrize(
        ("cli", "message"),
        [
            ({"engine": "llama-cpp"}, "engine llama-cpp needs model"),
            (
                {"engine": "llama-cpp", "model": "/m.gguf", "tokenizer": "/t.json"},
                "tokenizer is not used with engine llama-cpp",
            ),
            (
                {"engine": "llama-cpp", "model": "/m.gguf", "step_time_s": "0.1"},
                "step_time_s: only for engine sim",
            ),
            ({"model": "/m.gguf"}, "model: only for engine llama-cpp"),
            ({"sequences": "4", "threads": "2"}, "sequences, threads: only for engine llama-cpp"),
            (
                {"engine": "llama-cpp", "model": "/m.gguf", "batch_size": "8", "sequences": "16"},
                "batch_size (8) is below sequences (16)",
            ),
            ({"engine": "vllm"}, "engine"),
            ({"engine": "llama-cpp", "model": "/m.gguf", "sequences": "257"}, "sequences"),
        ],
    )
    def test_each_is_one_line_naming_the_setting(self, cli: dict[str, str], message: str) -> None:
        with pytest.raises(SettingsError) as refused:
            load_settings(cli)
        assert message in str(refused.value)
        assert "\n" not in str(refused.value)

    def test_a_toml_setting_of_the_other_engine_is_refused(self, tmp_path: Path) -> None:
        config = tmp_path / "stack.toml"
        config.write_text('engine = "sim"\ncontext_size = 2048\n', encoding="utf-8")
        with pytest.raises(SettingsError, match="context_size: only for engine llama-cpp"):
            load_settings({}, config_file=config)
