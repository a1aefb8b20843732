"""One router module per resource; :func:`app.main.create_app` includes them all."""

from app.routers import (
    abort,
    audit,
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
    worker_stats,
    workers,
)

__all__ = [
    "abort",
    "audit",
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
    "worker_stats",
    "workers",
]
