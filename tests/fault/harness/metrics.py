"""The stack's rejects as ``/metrics`` reports them, for the whole host.

``switchboard_rejected_frames_total{process, reason}`` holds the routers' counts (read
over their control sockets at scrape time) and those the engine, the detokenizers and
the workers export about once a second (``docs/metrics.md``); the processes of one role
add up under one ``process`` label.
"""

from __future__ import annotations

from collections import Counter

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["DROPPED", "REJECTED", "rejected", "scrape_dropped", "scrape_rejected"]

REJECTED = "switchboard_rejected_frames_total"
DROPPED = "switchboard_dropped_messages_total"


def rejected(exposition: str, name: str = REJECTED) -> Counter[tuple[str, str]]:
    """``(process, reason)`` -> count of the family ``name``, from a Prometheus text
    exposition."""
    counts: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name:
                key = (sample.labels["process"], sample.labels["reason"])
                counts[key] += int(sample.value)
    return counts


async def scrape_rejected(admin: httpx.AsyncClient) -> Counter[tuple[str, str]]:
    response = await admin.get("/metrics")
    response.raise_for_status()
    return rejected(response.text)


async def scrape_dropped(admin: httpx.AsyncClient) -> dict[tuple[str, str], int]:
    """``(process, reason)`` -> messages the stack counted as dropped, for diagnosis."""
    response = await admin.get("/metrics")
    response.raise_for_status()
    return dict(rejected(response.text, DROPPED))
