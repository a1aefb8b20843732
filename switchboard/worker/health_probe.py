"""``GET /health_generate``: does a one-token generation go through, and if not, why.

Every answer is JSON:

* **200** ``{"status": "ok", "worker_id", "latency_s"}``: a one-token generation finished
  within ``health_generate_timeout_s`` (20 s);
* **200** ``{"status": "paused", "worker_id", "pause_mode", "message"}``, at once, while
  the stack is paused (or as soon as a pause begins during the probe's generation): a
  pause is an operator's choice, not a fault, and requests sent meanwhile wait for
  continue rather than fail, so a probe (a Kubernetes liveness or readiness probe, a
  load balancer's check) should keep the worker; no generation is tried;
* **503** in the worker's error shape, ``Retry-After`` included: no generation finished
  in time (``message`` says so); the worker is stopping or not registered yet
  (answered by the admission error handler, as for any request).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Final

from fastapi.responses import JSONResponse

from router_core.wire.requests import SamplingParams
from router_core.worker_link import WorkerSession
from switchboard.worker.errors import error_body
from switchboard.worker.generation import Generation, TextResult
from switchboard.worker.settings import WorkerSettings

__all__ = ["PAUSE_CHECK_S", "probe_generation"]

#: How often a probe whose generation is in flight checks whether a pause began (an
#: ``in_place`` pause freezes that generation, which would otherwise hold the probe to
#: its timeout). The session has no event for it; reading a flag this often costs nothing.
PAUSE_CHECK_S: Final = 0.05


def _paused(session: WorkerSession, worker_id: str) -> JSONResponse:
    mode = session.pause_mode
    message = (
        f"generation is paused (mode {mode}) by an operator; no generation was tried, and "
        "requests sent now wait until continue"
    )
    body = {"status": "paused", "worker_id": worker_id, "pause_mode": mode, "message": message}
    return JSONResponse(body)


async def _generate(generation: Generation) -> TextResult:
    await generation.link.wait_admission()
    prompt = generation.prompts("ping")[0]
    params = SamplingParams(max_new_tokens=1)
    return await generation.generate_text(prompt, params, f"health-{generation.new_rid()}")


async def probe_generation(generation: Generation, settings: WorkerSettings) -> JSONResponse:
    """The probe's answer (see the module docstring). ``AdmissionRefused`` and
    ``RouterUnavailable`` propagate to their error handlers (503)."""
    session = generation.link.session
    if session.registered and session.paused:
        return _paused(session, settings.worker_id)
    started = time.monotonic()
    task = asyncio.ensure_future(_generate(generation))
    try:
        async with asyncio.timeout(settings.health_generate_timeout_s):
            while not task.done():
                await asyncio.wait({task}, timeout=PAUSE_CHECK_S)
                if not task.done() and session.paused:
                    return _paused(session, settings.worker_id)
        result = task.result()
    except TimeoutError:
        timeout = settings.health_generate_timeout_s
        message = f"no one-token generation finished within {timeout:g} s"
        body = error_body(message, "service_unavailable", 503)
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if session.paused and (result.finish_reason or {}).get("type") == "abort":
        return _paused(session, settings.worker_id)  # an abort-mode pause ended it
    latency = round(time.monotonic() - started, 6)
    return JSONResponse({"status": "ok", "worker_id": settings.worker_id, "latency_s": latency})
