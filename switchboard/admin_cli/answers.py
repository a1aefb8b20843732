"""The admin API's answers as the operator commands read them: msgspec structs mirroring
the response models of :mod:`app.models`, decoded by :func:`decode`.

Each struct holds the fields the commands show. A field the text can do without is
optional, and fields not listed are ignored, so an answer from a newer admin app still
reads; a body without a required field, or with a field of the wrong type, is an
:class:`~switchboard.admin_cli.errors.UnexpectedAnswer`. (msgspec, not the app's
pydantic models: the CLI loads neither pydantic nor FastAPI.)
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from switchboard.admin_cli.errors import UnexpectedAnswer

__all__ = [
    "EngineInfo",
    "FreezeGcResult",
    "Load",
    "LoadResponse",
    "Operation",
    "RouterInfo",
    "Status",
    "Worker",
    "WorkerList",
    "decode",
]

Answer = TypeVar("Answer")


class Worker(msgspec.Struct, kw_only=True):
    """One worker (``GET /api/workers/{id}``, and a drain's or undrain's answer)."""

    id: str
    state: str
    inflight: int | None = None
    last_heartbeat_s_ago: float | None = None
    requests_sent: int | None = None
    safe_to_delete: bool = False
    departure_reason: str | None = None


class WorkerList(msgspec.Struct, kw_only=True):
    """``GET /api/workers``."""

    workers: list[Worker]


class Operation(msgspec.Struct, kw_only=True):
    """One pause or continue barrier (a 504's body carries one too)."""

    action: str
    complete: bool
    op_id: str | None = None
    seq: int | None = None
    mode: str | None = None
    acked: list[str] = []
    stragglers: list[str] = []
    departed: list[str] = []
    elapsed_s: float | None = None
    finished_at: float | None = None


class Load(msgspec.Struct, kw_only=True):
    """The engine's latest load snapshot."""

    running: int
    waiting: int
    max_running: int
    token_usage: float
    step: int
    taken_ns: int | None = None
    age_s: float | None = None


class LoadResponse(msgspec.Struct, kw_only=True):
    """``GET /api/load``: null before the engine's first report."""

    load: Load | None


class EngineInfo(msgspec.Struct, kw_only=True):
    live: bool = False
    load: Load | None = None


class RouterInfo(msgspec.Struct, kw_only=True):
    pid: int | None = None
    uptime_s: float | None = None


class Status(msgspec.Struct, kw_only=True):
    """``GET /api/status``."""

    paused: bool
    pause_mode: str | None = None
    pause_state_since: float | None = None
    recent_operations: list[Operation] = []
    engine: EngineInfo = msgspec.field(default_factory=EngineInfo)
    workers: dict[str, int] = {}
    versions: dict[str, str] = {}
    router: RouterInfo | None = None


class FreezeGcResult(msgspec.Struct, kw_only=True):
    """``POST /api/freeze_gc``."""

    frozen: list[str]
    forwarded_to: list[str]


def decode(kind: type[Answer], body: Any) -> Answer:
    """``body`` (decoded JSON) as a ``kind``; UnexpectedAnswer if it is not one."""
    try:
        return msgspec.convert(body, kind)
    except msgspec.ValidationError as exc:
        raise UnexpectedAnswer(f"unexpected answer from the admin app ({exc})") from exc
