"""What route handlers get injected: the worker's :class:`Generation` and its settings."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from switchboard.worker.generation import Generation
from switchboard.worker.settings import WorkerSettings

__all__ = ["GenerationDep", "SettingsDep"]


def _generation(request: Request) -> Generation:
    generation: Generation = request.app.state.generation
    return generation


def _settings(request: Request) -> WorkerSettings:
    settings: WorkerSettings = request.app.state.settings
    return settings


GenerationDep = Annotated[Generation, Depends(_generation)]
SettingsDep = Annotated[WorkerSettings, Depends(_settings)]
