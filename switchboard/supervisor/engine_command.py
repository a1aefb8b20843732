"""A user's engine as a command line: its words, placeholders and environment.

Pure: it turns an ``engine_command`` setting and the stack's paths into the argv and the
environment variables the supervisor (and ``switchboard engine-check``) start the
engine with, so both start it the same way and it is tested without starting anything.

The command is split into words as a POSIX shell splits them (:func:`shlex.split`) but
is never run by a shell. Inside each word, the placeholders of :data:`PLACEHOLDERS` are
replaced by the stack's values; ``{{`` and ``}}`` stand for literal braces. The same
values always reach the engine as the environment variables of :data:`ENV_NAMES`, and
the stack key only that way: a command line is visible to every user in ``ps``.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from router_core.endpoints import EngineEndpoints

__all__ = [
    "ENV_NAMES",
    "KEY_ENV",
    "PLACEHOLDERS",
    "VOCAB_FILE",
    "EngineCommandError",
    "EnginePlaces",
    "check_command",
    "command_words",
    "engine_argv",
    "engine_environment",
    "exec_argv",
]

#: Placeholder -> what it stands for (the docs' table is generated from this).
PLACEHOLDERS: Final[Mapping[str, str]] = {
    "inbound": "the endpoint the engine binds a PULL socket on: requests and commands",
    "events": "the endpoint the engine connects a PUSH socket to: ACK and LOAD",
    "outputs": "the endpoint the engine connects a PUSH socket to: output batches",
    "run_dir": "the stack's run directory",
    "key_file": "the stack key's file",
    "vocab_file": "the workers' vocabulary (switchboard-vocab/1, MessagePack)",
    "parent_pid": "the supervisor's pid: the engine exits when it is gone",
}

#: Placeholder -> the environment variable carrying the same value, plus the key's own.
ENV_NAMES: Final[Mapping[str, str]] = {
    "inbound": "SWITCHBOARD_ENGINE_INBOUND",
    "events": "SWITCHBOARD_ENGINE_EVENTS",
    "outputs": "SWITCHBOARD_ENGINE_OUTPUTS",
    "run_dir": "SWITCHBOARD_RUN_DIR",
    "key_file": "SWITCHBOARD_KEY_FILE",
    "vocab_file": "SWITCHBOARD_VOCAB_FILE",
    "parent_pid": "SWITCHBOARD_PARENT_PID",
}
#: The stack key's text: in every ACK's and LOAD's ``secret``.
KEY_ENV: Final = "SWITCHBOARD_STACK_KEY"
#: The vocabulary file's name in the run directory.
VOCAB_FILE: Final = "vocab.msgpack"

_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


class EngineCommandError(ValueError):
    """An engine command that cannot be run; the message says what is wrong."""


@dataclass(frozen=True)
class EnginePlaces:
    """The values the placeholders stand for, for one stack (or one engine-check)."""

    endpoints: EngineEndpoints
    run_dir: Path
    key_file: Path
    vocab_file: Path
    parent_pid: int

    def values(self) -> dict[str, str]:
        """Placeholder name -> its text."""
        return {
            "inbound": self.endpoints.inbound,
            "events": self.endpoints.events,
            "outputs": self.endpoints.outputs,
            "run_dir": str(self.run_dir),
            "key_file": str(self.key_file),
            "vocab_file": str(self.vocab_file),
            "parent_pid": str(self.parent_pid),
        }


def _substitute(word: str, values: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        text = match.group(0)
        if text in ("{{", "}}"):
            return text[0]
        name = match.group(1)
        if name is None:
            raise EngineCommandError(f"a lone {text!r} in {word!r}: write {text * 2} for a brace")
        if name not in values:
            known = ", ".join("{" + each + "}" for each in PLACEHOLDERS)
            raise EngineCommandError(f"unknown placeholder {{{name}}} in {word!r}; known: {known}")
        return values[name]

    return _FIELD.sub(replace, word)


def command_words(command: str) -> list[str]:
    """The words of ``command``; EngineCommandError if it does not split or is empty."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise EngineCommandError(f"cannot split into words: {exc}") from exc
    if not words:
        raise EngineCommandError("is empty")
    return words


def check_command(command: str) -> None:
    """EngineCommandError for a command :func:`engine_argv` would refuse, without paths."""
    dummy = dict.fromkeys(PLACEHOLDERS, "")
    for word in command_words(command):
        _substitute(word, dummy)


def engine_argv(command: str, places: EnginePlaces) -> tuple[str, ...]:
    """The argv of ``command`` with every placeholder replaced."""
    values = places.values()
    return tuple(_substitute(word, values) for word in command_words(command))


def exec_argv(parent_pid: int, argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` run through :mod:`switchboard.supervisor.engine_exec` for ``parent_pid``
    (it dies with that process). ``-P``: the engine's working directory is not on the
    wrapper's import path, so no file there can stand in for a module it imports."""
    wrapper = (sys.executable, "-P", "-m", "switchboard.supervisor.engine_exec")
    return (*wrapper, str(parent_pid), "--", *argv)


def engine_environment(places: EnginePlaces, key: str | None) -> dict[str, str]:
    """The variables every engine command gets: one per placeholder, and the key."""
    values = places.values()
    env = {ENV_NAMES[name]: value for name, value in values.items()}
    env[KEY_ENV] = key or ""
    return env
