"""``/api/events`` against a real stack: a snapshot first, then worker, pause and load
events within a second of the change that made them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.integration.harness.admin_stack import AdminStack
from tests.integration.test_admin_api import stack

pytestmark = pytest.mark.integration

__all__ = ["stack"]

#: An event reaches a subscriber within this long of the change (poll 0.25 s + margin).
EVENT_DEADLINE_S = 1.0


@dataclass
class EventReader:
    """Events read from one ``/api/events`` stream, each with its arrival time."""

    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self, response: httpx.Response) -> None:
        kind, data = "", ""
        async for line in response.aiter_lines():
            if line.startswith(":"):
                self.comments.append(line)
            elif line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = line.removeprefix("data: ")
            elif line == "" and kind:
                self.events.append((time.monotonic(), kind, json.loads(data)))
                kind, data = "", ""
                self.arrived.set()

    async def wait_for(self, after: float, kind: str, match: Any, deadline_s: float) -> float:
        """Seconds from ``after`` (monotonic) to the first ``kind`` event after it for which
        ``match(data)`` holds; fails after waiting ``deadline_s``."""
        limit = time.monotonic() + deadline_s
        while True:
            for arrived, seen, data in self.events:
                if arrived >= after and seen == kind and match(data):
                    return arrived - after
            remaining = limit - time.monotonic()
            if remaining <= 0:
                recent = [(seen, data) for arrived, seen, data in self.events if arrived >= after]
                raise AssertionError(f"no matching {kind} event in {deadline_s} s; saw {recent}")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), remaining)


@contextlib.asynccontextmanager
async def event_stream(client: httpx.AsyncClient) -> AsyncIterator[EventReader]:
    """Read ``/api/events`` in the background while the body runs."""
    reader = EventReader()
    async with client.stream("GET", "/api/events") as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        task = asyncio.create_task(reader.read(response))
        try:
            yield reader
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await task


async def _until_the_view_lists(stack: AdminStack, workers: set[str]) -> None:
    """Wait (at most 5 s) until a new stream's snapshot lists ``workers``.

    A snapshot is the hub's latest poll, up to one poll interval behind ``/api/workers``,
    which the stack fixture waits on; right after the stack starts it may still miss one.
    """
    limit = time.monotonic() + 5.0
    async with stack.async_client(stack.viewer_token) as client:
        while True:
            async with event_stream(client) as reader:
                await reader.wait_for(0.0, "snapshot", lambda data: True, 5.0)
                listed = {item["id"] for item in reader.events[0][2]["workers"]}
            if listed >= workers or time.monotonic() > limit:
                return
            await asyncio.sleep(0.1)


class TestEvents:
    """``/api/events``: a snapshot, then worker and pause events within a second."""

    def test_snapshot_then_drain_and_pause_events(self, stack: AdminStack) -> None:
        """A viewer's stream opens with a snapshot; a drain and a pause each arrive as an
        event within a second of the operator's call returning."""

        async def scenario() -> tuple[float, float, float]:
            await _until_the_view_lists(stack, {"w0", "w1"})
            async with (
                stack.async_client(stack.viewer_token) as watcher,
                stack.async_client() as operator,
                event_stream(watcher) as reader,
            ):
                await reader.wait_for(0.0, "snapshot", lambda data: True, 5.0)
                _, kind, snapshot = reader.events[0]
                assert kind == "snapshot"
                assert {item["id"] for item in snapshot["workers"]} >= {"w0", "w1"}
                assert snapshot["status"]["paused"] is False

                sent = time.monotonic()
                (await operator.post("/api/workers/w0/drain")).raise_for_status()
                drain_s = await reader.wait_for(
                    sent,
                    "worker",
                    lambda data: (
                        data["worker"]["id"] == "w0"
                        and data["worker"]["state"] in ("draining", "drained")
                        and data["change"] == "state"
                    ),
                    EVENT_DEADLINE_S,
                )
                sent = time.monotonic()
                (await operator.post("/api/workers/w0/undrain")).raise_for_status()
                await reader.wait_for(
                    sent,
                    "worker",
                    lambda data: (
                        data["worker"]["id"] == "w0" and data["worker"]["state"] == "serving"
                    ),
                    5.0,
                )

                sent = time.monotonic()
                body = {"mode": "retract", "timeout_s": 5}
                (await operator.post("/api/pause", json=body)).raise_for_status()
                pause_s = await reader.wait_for(
                    sent,
                    "pause",
                    lambda data: (
                        data["status"]["paused"] and data["status"]["pause_mode"] == "retract"
                    ),
                    EVENT_DEADLINE_S,
                )
                sent = time.monotonic()
                (await operator.post("/api/continue")).raise_for_status()
                continue_s = await reader.wait_for(
                    sent, "pause", lambda data: not data["status"]["paused"], EVENT_DEADLINE_S
                )
                return drain_s, pause_s, continue_s

        drain_s, pause_s, continue_s = asyncio.run(scenario())
        assert max(drain_s, pause_s, continue_s) < EVENT_DEADLINE_S

    def test_load_events_follow_generation(self, stack: AdminStack) -> None:
        """Requests running in the engine show up as ``load`` events."""

        async def scenario() -> list[dict[str, Any]]:
            async with (
                stack.async_client() as admin,
                httpx.AsyncClient(base_url=stack.base_url, timeout=30, trust_env=False) as http,
                event_stream(admin) as reader,
            ):
                body = {"text": "load me", "sampling_params": {"max_new_tokens": 200}}
                replies = [http.post("/generate", json=body) for _ in range(4)]
                generation = asyncio.gather(*replies)
                await reader.wait_for(
                    time.monotonic(), "load", lambda data: data["load"]["running"] > 0, 5.0
                )
                await generation
                return [data for _, kind, data in reader.events if kind == "load"]

        loads = asyncio.run(scenario())
        assert any(item["load"]["running"] > 0 for item in loads)
