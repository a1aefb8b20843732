"""A storm of pause and continue calls from several clients, with gates for the faults.

Each client sends its share of calls as fast as they are answered: half of them pauses in
a random mode, half continues, each with a random ``timeout_s``, to whichever pair of
paths the test drives (the admin API's ``/api/pause`` and ``/api/continue``, or SGLang's
``/pause_generation`` and ``/continue_generation`` on the serving port). Calls are
numbered as they start; a gate ``(number, event)`` holds every call from that number on
until the event is set, so that a fault lands in the storm's full flow and the storm
cannot run out before it (or before the faulted role is back). Every call is kept as a
:class:`Call`, with how long it took and how it was answered.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

__all__ = ["MODES", "TIMEOUTS_S", "Call", "Storm", "error_code", "overdue", "storm_client"]

TIMEOUTS_S = (0.5, 1.0, 2.0)
MODES = ("abort", "retract", "in_place")
#: How long a client waits at most, so that an overdue answer is measured, not cut.
CLIENT_WAIT_S = 30.0


@dataclass
class Call:
    """One pause or continue call of a storm."""

    number: int
    path: str
    #: The pause mode, None for a continue.
    mode: str | None
    #: ``time.monotonic()`` when it was sent.
    started: float
    timeout_s: float
    latency_s: float
    #: None: no answer (the client gave up or the connection broke: see ``error``).
    status: int | None
    #: Why it was not a 200, in a word or a line (empty for a 200).
    error: str

    @property
    def action(self) -> str:
        return "continue" if self.mode is None else "pause"

    def in_flight_at(self, moment: float) -> bool:
        return self.started < moment < self.started + self.latency_s


def error_code(answer: httpx.Response) -> str:
    """The ``code`` of an error body (the admin API's words), or the start of the text."""
    try:
        return str(answer.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return answer.text[:80]


class Storm:
    """The storm's numbering, its gates and every call made."""

    def __init__(self, gates: Sequence[tuple[int, asyncio.Event]] = ()) -> None:
        self.started = 0
        self.calls: list[Call] = []
        self.gates = list(gates)

    async def next_number(self) -> int:
        number = self.started
        self.started += 1
        for gate, event in self.gates:
            if number >= gate:
                await event.wait()
        return number


async def storm_client(
    client: httpx.AsyncClient,
    storm: Storm,
    rng: random.Random,
    count: int,
    *,
    paths: tuple[str, str],
    why: Callable[[httpx.Response], str] = error_code,
) -> None:
    """Send ``count`` calls on ``client``: ``paths`` are the pause path and the continue
    path; ``why`` names the cause of an answer that is not a 200."""
    pause_path, continue_path = paths
    for _ in range(count):
        number = await storm.next_number()
        timeout_s = rng.choice(TIMEOUTS_S)
        mode = rng.choice(MODES) if rng.random() < 0.5 else None
        body: dict[str, object] = {"timeout_s": timeout_s}
        if mode is not None:
            body["mode"] = mode
        path = continue_path if mode is None else pause_path
        started = time.monotonic()
        status: int | None = None
        error = ""
        try:
            answer = await client.post(path, json=body, timeout=timeout_s + CLIENT_WAIT_S)
            status = answer.status_code
            if status != 200:
                error = why(answer)
        except httpx.TimeoutException:
            error = "client timeout"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        latency = time.monotonic() - started
        storm.calls.append(Call(number, path, mode, started, timeout_s, latency, status, error))


def overdue(calls: Sequence[Call], slack_s: float) -> list[Call]:
    """Calls not answered, or answered more than ``slack_s`` after their timeout."""
    return [c for c in calls if c.status is None or c.latency_s > c.timeout_s + slack_s]
