"""The committed dashboards the tests read: their uids, the JSON of each, and the variable
values that make their queries runnable."""

from __future__ import annotations

import json
from typing import Any

from dashboards import JSON_DIR

__all__ = ["UIDS", "VARIABLES", "all_models", "load"]

UIDS = ("switchboard-overview", "switchboard-worker", "switchboard-latency")
VARIABLES = {"worker": "w0", "__rate_interval": "1m"}


def load(uid: str) -> dict[str, Any]:
    """The committed JSON of dashboard ``uid``."""
    model: dict[str, Any] = json.loads((JSON_DIR / f"{uid}.json").read_text(encoding="utf-8"))
    return model


def all_models() -> list[dict[str, Any]]:
    return [load(uid) for uid in UIDS]
