"""One router module per resource; :func:`app.main.create_app` includes them all."""

from app.routers import (
    commands,
    console,
    events,
    gc,
    health,
    load,
    metrics,
    pause,
    status,
    whoami,
    workers,
)

__all__ = [
    "commands",
    "console",
    "events",
    "gc",
    "health",
    "load",
    "metrics",
    "pause",
    "status",
    "whoami",
    "workers",
]
