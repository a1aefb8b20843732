"""One router module per resource; :func:`app.main.create_app` includes them all."""

from app.routers import (
    audit,
    commands,
    console,
    events,
    health,
    history,
    load,
    metrics,
    operations,
    status,
    whoami,
    worker_stats,
    workers,
)

__all__ = [
    "audit",
    "commands",
    "console",
    "events",
    "health",
    "history",
    "load",
    "metrics",
    "operations",
    "status",
    "whoami",
    "worker_stats",
    "workers",
]
