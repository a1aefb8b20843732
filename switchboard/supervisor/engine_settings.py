"""The engine part of the stack's settings: which engine, its model, and its limits.

:class:`EngineSettings` is the part of :class:`~switchboard.supervisor.settings.
StackSettings` that chooses the engine (``engine = "sim"``, the simulation,
``"llama-cpp"`` with ``model = "PATH.gguf"``, or ``"command"``: a user's own engine,
``engine_command``, run in ``engine_cwd`` with ``engine_env`` added to its
environment; :mod:`~switchboard.supervisor.engine_command`) and sizes it. Each backend's settings
default to that backend's own definition (:class:`~switchboard.engine.scheduler.
SchedulerConfig`, :class:`~switchboard.engine.llama_cpp.config.LlamaConfig`); a setting
of the other backend given a value is refused, never ignored. With llama.cpp, the
workers and detokenizers tokenize with the model's own tokenizer (its GGUF file), so a
``tokenizer`` setting is refused too. :func:`engine_flags` is what the supervisor hands
the engine, :func:`served_tokenizer` what it hands the workers and detokenizers. A
``chat_template`` file replaces the model's own chat template in every worker, with
either engine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from switchboard.engine.llama_cpp.config import LlamaConfig
from switchboard.engine.scheduler import SchedulerConfig
from switchboard.supervisor.engine_command import (
    ENV_NAMES,
    KEY_ENV,
    EngineCommandError,
    check_command,
    command_words,
)

__all__ = [
    "EngineBackend",
    "EngineSettings",
    "engine_description",
    "engine_flags",
    "served_model_name",
    "served_tokenizer",
]

#: ``engine``: the simulated engine, llama.cpp serving ``model``, or ``engine_command``.
EngineBackend = Literal["sim", "llama-cpp", "command"]

#: The simulated engine's settings, each the engine flag ``--<name with dashes>``.
_SIM_ONLY = ("step_time_s", "per_token_cost_s", "max_running_requests", "max_tokens_per_step")
#: llama.cpp's settings, likewise.
_LLAMA_ONLY = ("context_size", "batch_size", "sequences", "threads")
#: Settings of the built-in engines that a command's engine does not take.
_BUILT_IN_ONLY = ("max_waiting_requests", *_SIM_ONLY, *_LLAMA_ONLY)
#: The engine command's own settings.
_COMMAND_ONLY = ("engine_cwd", "engine_env")
#: The variables the supervisor sets for an engine command: engine_env cannot.
_RESERVED_ENV = frozenset({*ENV_NAMES.values(), KEY_ENV})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EngineSettings(BaseSettings):
    """Which engine the stack runs, and its settings."""

    engine: EngineBackend = Field(
        "sim",
        description="sim: the built-in simulated engine; llama-cpp: the model file (model) "
        "through llama.cpp, with the model's own tokenizer in every worker; command: your "
        "own engine, engine_command (implied when that is set)",
    )
    engine_command: str | None = Field(
        None,
        description="the command line of your own engine, split into words like a shell "
        "does but run without one; {inbound} {events} {outputs} {run_dir} {key_file} "
        "{vocab_file} {parent_pid} in it are replaced, and the SWITCHBOARD_ENGINE_* "
        "variables carry the same (docs/engine.md, 'Your engine under switchboard up')",
    )
    engine_cwd: Path | None = Field(
        None,
        description="engine command: its working directory (unset: the directory up "
        "was started in)",
    )
    engine_env: dict[str, str] | None = Field(
        None,
        description="engine command: variables added to its environment (a TOML table, "
        'or a JSON object such as {"MY_VAR": "1"})',
    )
    model: Path | None = Field(
        None, description="the GGUF model file llama-cpp serves (engine = llama-cpp)"
    )
    tokenizer: Path | None = Field(
        None,
        description="tokenizer.json, model directory or GGUF file (unset: the built-in "
        "tokenizer; with engine llama-cpp, always the model's own)",
    )
    chat_template: Path | None = Field(
        None,
        description="a Jinja chat template file the workers render /v1/chat/completions "
        "with (unset: the model's own, ChatML for the built-in tokenizer)",
    )
    context_size: int = Field(
        LlamaConfig.context_size,
        ge=2,
        description="llama-cpp: KV cells shared by the running requests, the most one holds",
    )
    batch_size: int = Field(
        LlamaConfig.batch_size, ge=1, description="llama-cpp: tokens one step feeds the model"
    )
    sequences: int = Field(
        LlamaConfig.sequences, ge=1, le=256, description="llama-cpp: requests decoded together"
    )
    threads: int = Field(
        LlamaConfig.threads,
        ge=0,
        description="llama-cpp: CPU threads (0: one fewer than the usable CPUs)",
    )
    step_time_s: float = Field(
        SchedulerConfig.step_time_s, ge=0, description="engine: seconds per scheduler step"
    )
    per_token_cost_s: float = Field(
        SchedulerConfig.per_token_cost_s, ge=0, description="engine: extra seconds per token"
    )
    max_running_requests: int = Field(
        SchedulerConfig.max_running_requests, ge=1, description="engine: running requests at most"
    )
    max_waiting_requests: int = Field(
        SchedulerConfig.max_waiting_requests,
        ge=1,
        description="engine: requests waiting to run at most; beyond, one is refused at once",
    )
    max_tokens_per_step: int = Field(
        SchedulerConfig.max_tokens_per_step, ge=1, description="engine: prefill + decode budget"
    )

    # Named apart from StackSettings' own ``_expand_home``: a subclass's validator of the
    # same name replaces this one, and ``~`` in a TOML or environment path stayed literal.
    @field_validator("tokenizer", "model", "chat_template", "engine_cwd")
    @classmethod
    def _expand_engine_paths(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser()

    @field_validator("engine_command")
    @classmethod
    def _runnable_command(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_command(value)
            except EngineCommandError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @field_validator("engine_env", mode="before")
    @classmethod
    def _env_object(cls, value: object) -> object:
        # A flag's value arrives as text; the environment's is decoded by pydantic.
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f'must be a JSON object such as {{"NAME": "value"}}: {exc}'
                ) from exc
        if isinstance(value, dict):
            for name, text in value.items():
                if not isinstance(text, str):
                    raise ValueError(f"{name}: the value must be a string, not {text!r}")
        return value

    @field_validator("engine_env")
    @classmethod
    def _env_names(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name in value or {}:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a variable name")
            if name in _RESERVED_ENV:
                raise ValueError(f"{name} is set by the supervisor for every engine command")
        return value

    @model_validator(mode="after")
    def _one_engine(self) -> Self:
        defaults = type(self).model_fields
        implied = "engine" not in self.model_fields_set
        if self.engine_command is not None and self.engine == "sim" and implied:
            self.engine = "command"
        if self.engine == "command":
            return self._command_engine()
        if self.engine_command is not None:
            raise ValueError(f"engine_command: not for engine {self.engine}")
        given = [name for name in _COMMAND_ONLY if getattr(self, name)]
        if given:
            raise ValueError(f"{', '.join(given)}: only for an engine command")
        if self.engine == "llama-cpp":
            if self.model is None:
                raise ValueError("engine llama-cpp needs model (--model PATH.gguf)")
            if self.tokenizer is not None:
                raise ValueError(
                    "tokenizer is not used with engine llama-cpp: every process tokenizes "
                    "with the model's own"
                )
            given = [name for name in _SIM_ONLY if getattr(self, name) != defaults[name].default]
            if given:
                raise ValueError(f"{', '.join(given)}: only for engine sim")
        else:
            given = [name for name in _LLAMA_ONLY if getattr(self, name) != defaults[name].default]
            if self.model is not None:
                given.insert(0, "model")
            if given:
                raise ValueError(f"{', '.join(given)}: only for engine llama-cpp")
        if self.engine == "llama-cpp" and self.batch_size < self.sequences:
            raise ValueError(
                f"batch_size ({self.batch_size}) is below sequences ({self.sequences}): every "
                "decoding request feeds one token per step"
            )
        return self

    def _command_engine(self) -> Self:
        """A user's engine: a command, and none of the built-in engines' settings."""
        if self.engine_command is None:
            raise ValueError("engine command needs engine_command (--engine-command CMD)")
        defaults = type(self).model_fields
        given = [name for name in _BUILT_IN_ONLY if getattr(self, name) != defaults[name].default]
        if self.model is not None:
            given.insert(0, "model")
        if given:
            raise ValueError(f"{', '.join(given)}: only for engines sim and llama-cpp")
        return self


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def engine_flags(settings: EngineSettings) -> tuple[str, ...]:
    """The engine's own flags for ``settings`` (after the common ones)."""
    common = (_flag("max_waiting_requests"), str(settings.max_waiting_requests))
    if settings.engine == "llama-cpp":
        flags: tuple[str, ...] = ("--backend", "llama-cpp", "--model", str(settings.model))
        for name in _LLAMA_ONLY:
            flags += (_flag(name), str(getattr(settings, name)))
        return flags + common
    flags = ()
    for name in _SIM_ONLY:
        value = getattr(settings, name)
        flags += (_flag(name), repr(value) if isinstance(value, float) else str(value))
    tokenizer = ("--tokenizer", str(settings.tokenizer)) if settings.tokenizer else ()
    return flags + common + tokenizer


def engine_description(settings: EngineSettings) -> str:
    """The engine as the serving line names it: ``built-in engine``, ``llama-cpp engine
    serving m.gguf``."""
    if settings.engine == "llama-cpp" and settings.model is not None:
        return f"llama-cpp engine serving {settings.model.name}"
    if settings.engine == "command" and settings.engine_command is not None:
        return f"engine command {Path(command_words(settings.engine_command)[0]).name}"
    return "built-in engine"


def served_model_name(settings: EngineSettings, model_name: str, default: str) -> str:
    """The model name the workers report: ``model_name``, or with llama.cpp and
    ``model_name`` left at ``default``, the model file's name without ``.gguf``."""
    if settings.engine == "llama-cpp" and settings.model is not None and model_name == default:
        return settings.model.name.removesuffix(".gguf")
    return model_name


def served_tokenizer(settings: EngineSettings) -> Path | None:
    """The tokenizer the workers and detokenizers load: the model with llama.cpp."""
    return settings.model if settings.engine == "llama-cpp" else settings.tokenizer
