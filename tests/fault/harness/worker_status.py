"""Every worker's own status, through the port they share.

A client cannot choose a worker, but each new connection goes to one of them, and
``GET /get_server_info`` says which (``worker_id``). :func:`every_worker_status` opens
fresh connections until each of the expected workers has answered (bounded).
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["every_worker_status"]

#: Fresh connections allowed to reach every worker (each lands on one of N at random).
ATTEMPTS = 400


async def every_worker_status(base_url: str, worker_ids: set[str]) -> dict[str, dict[str, Any]]:
    """``worker_id`` -> its ``/get_server_info`` answer, for every id in ``worker_ids``."""
    found: dict[str, dict[str, Any]] = {}
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(
        base_url=base_url, timeout=5.0, limits=limits, trust_env=False
    ) as client:
        for _ in range(ATTEMPTS):
            if worker_ids <= found.keys():
                break
            try:
                response = await client.get("/get_server_info")
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                info = response.json()
                found[info["worker_id"]] = info
    missing = worker_ids - found.keys()
    assert not missing, f"no answer from {sorted(missing)} in {ATTEMPTS} connections"
    return found
