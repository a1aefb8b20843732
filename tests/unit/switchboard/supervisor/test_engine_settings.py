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


class TestTheChatTemplate:
    """``chat_template`` reaches every worker, and a file they could not use stops the
    stack before it starts, naming the setting as given."""

    def test_every_layer_and_only_the_workers(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Flag, TOML and environment; ``~`` expanded; workers get --chat-template, the
        detokenizers and the engine do not; either engine."""
        config = tmp_path / "stack.toml"
        config.write_text('chat_template = "~/t.jinja"\n', encoding="utf-8")
        assert load_settings({}, config_file=config).chat_template == Path.home() / "t.jinja"
        monkeypatch.setenv("SWITCHBOARD_CHAT_TEMPLATE", "/env.jinja")
        assert load_settings({}).chat_template == Path("/env.jinja")
        settings = load_settings({"chat_template": "/t.jinja", "workers": "2"})
        for role in ("worker-w0", "worker-w1"):
            assert _value(_argv(settings, tmp_path, role), "--chat-template") == "/t.jinja"
        for role in ("detokenizer-0", "engine"):
            assert "--chat-template" not in _argv(settings, tmp_path, role)
        llama = load_settings({"engine": "llama-cpp", "model": "/m.gguf", "chat_template": "/t"})
        assert _value(_argv(llama, tmp_path, "worker-w0"), "--chat-template") == "/t"

    def test_unset_is_the_models_own(self, tmp_path: Path) -> None:
        """Unset, the workers are given no --chat-template."""
        settings = load_settings({})
        assert settings.chat_template is None
        assert "--chat-template" not in _argv(settings, tmp_path, "worker-w0")

    @pytest.mark.parametrize(
        ("content", "reason"),
        [
            (None, "not found (expected a Jinja template file)"),
            ("{% for %}", "does not compile: Expected an expression"),
        ],
        ids=["missing", "bad-syntax"],
    )
    def test_refused_at_start(self, tmp_path: Path, content: str | None, reason: str) -> None:
        """A missing or uncompilable file fails the preflight, in one line naming the flag."""
        from switchboard.supervisor.preflight import check_chat_template
        from switchboard.text import load_tokenizer

        template = tmp_path / "t.jinja"
        if content is not None:
            template.write_text(content, encoding="utf-8")
        settings = load_settings({"chat_template": str(template)})
        with pytest.raises(SettingsError) as caught:
            check_chat_template(
                load_tokenizer(),
                None,
                settings.chat_template,
                where=settings.origin("chat_template"),
            )
        message = str(caught.value)
        assert message.startswith(f"--chat-template {template}: {reason}")
        assert "\n" not in message

    def test_a_models_broken_template_is_refused_too(self, tmp_path: Path) -> None:
        """Without the setting, the model's own template must compile; the refusal says
        how to replace it."""
        from switchboard.supervisor.preflight import check_chat_template
        from switchboard.text import load_tokenizer

        model = tmp_path / "model"
        model.mkdir()
        (model / "tokenizer.json").write_text(load_tokenizer().backend.to_str(), encoding="utf-8")
        (model / "chat_template.jinja").write_text("{{ x", encoding="utf-8")
        with pytest.raises(SettingsError, match="set chat_template to use another"):
            check_chat_template(load_tokenizer(model), model, None)
        (model / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
        check_chat_template(load_tokenizer(model), model, None)
