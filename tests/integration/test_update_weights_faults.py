"""Live weight updates when a process dies in the middle, against a real ``switchboard up``.

The engine is the built-in one run as an engine command with ``--weight-load-s 2``, so
a load is slow enough to be interrupted. Under streaming load:

* the router SIGKILLed while the engine loads: the caller gets a bounded error (the
  admin app's 503), the supervisor restarts the router, the restarted router adopts the
  version the engine reports and continues the generation its predecessor paused;
* the engine SIGKILLed while it loads: the update is answered 502 naming the restart,
  generation continues, and the restarted engine serves its own weights.

Every streamed request completes with a text its versions explain, or ends with a clear
error; nothing is left paused.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from switchboard.text import load_tokenizer
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import wait_until
from tests.integration.harness.weight_load import Load, explains

pytestmark = pytest.mark.integration

#: Seconds the engine's simulated load takes.
LOAD_S = 2.0
ENGINE = (
    f"{sys.executable} -m switchboard.cli engine --run-dir {{run_dir}} "
    f"--parent-pid {{parent_pid}} --outputs-via direct --step-time-s 0.01 "
    f"--weight-load-s {LOAD_S}"
)


@pytest.fixture
def stack(tmp_path: Any) -> Iterator[AdminStack]:
    with admin_stack(
        tmp_path, workers=2, step_time=None, extra_args=("--engine-command", ENGINE)
    ) as running:
        yield running


def status(stack: AdminStack) -> dict[str, Any]:
    with stack.client(stack.viewer_token, timeout=10) as client:
        answer = client.get("/api/status")
    return dict(answer.json()) if answer.status_code == 200 else {}


def serving_version(stack: AdminStack) -> str | None:
    """The version the engine reports while generation runs, else None."""
    now = status(stack)
    if not now or now["paused"]:
        return None
    load = now["engine"]["load"] or {}
    return str(load.get("weight_version", "")) or "default"


class Update(threading.Thread):
    """One update_weights call on a thread: its answer, or what stopped it."""

    def __init__(self, stack: AdminStack, **body: Any) -> None:
        super().__init__(daemon=True)
        self.stack, self.body = stack, body
        self.answer: httpx.Response | None = None
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with self.stack.client(timeout=60) as client:
                self.answer = client.post("/api/update_weights", json=self.body)
        except BaseException as exc:  # reported by the test
            self.failure = exc

    def finished(self, timeout: float) -> httpx.Response:
        self.join(timeout)
        assert not self.is_alive(), f"update_weights did not answer within {timeout} s"
        assert self.failure is None, self.failure
        assert self.answer is not None
        return self.answer


def loading(stack: AdminStack) -> bool:
    """The update's pause is done: the engine is loading."""
    return bool(status(stack).get("paused"))


def update_loading(stack: AdminStack, version: str, timeout_s: float = 20.0) -> Update:
    """An update to ``version`` (its barrier's ``timeout_s``) started on its thread, once
    its pause is done."""
    time.sleep(0.5)  # the load's streams are running
    update = Update(stack, version=version, mode="retract", timeout_s=timeout_s)
    update.start()
    wait_until(lambda: loading(stack), 10, "the update's pause")
    return update


def check_load(load: Load, tokenizer: Any, chain: list[str]) -> None:
    assert load.failures == [], load.failures[:3]
    assert load.done, "no request finished"
    problems = [p for p in (explains(tokenizer, done, chain) for done in load.done) if p]
    assert problems == [], problems[:5]


def test_router_killed_while_the_engine_loads(stack: AdminStack) -> None:
    tokenizer = load_tokenizer()
    with Load(stack.base_url, "router kill") as load:
        # The update cannot succeed (its router dies): the admin app answers once the
        # barrier's timeout (and the client's margin) passed, so the timeout is short,
        # three times the load, which the pause must precede.
        update = update_loading(stack, "after-kill", timeout_s=3 * LOAD_S)
        router_pid = status(stack)["router"]["pid"]
        os.kill(router_pid, signal.SIGKILL)
        answer = update.finished(60)
        assert answer.status_code == 503, answer.text  # the router died: no answer
        wait_until(lambda: serving_version(stack) == "after-kill", 30, "serving after-kill")
        assert status(stack)["router"]["pid"] != router_pid
        time.sleep(0.5)
    check_load(load, tokenizer, ["default", "after-kill"])
    assert any(done.meta.get("weight_version") == "after-kill" for done in load.done)


def test_engine_killed_while_it_loads(stack: AdminStack) -> None:
    tokenizer = load_tokenizer()
    with Load(stack.base_url, "engine kill") as load:
        update = update_loading(stack, "never-loaded")
        time.sleep(LOAD_S / 4)
        engines = [p for p in stack.descendants() if "engine" in " ".join(p.cmdline()[:4])]
        (engine,) = [p for p in engines if "--weight-load-s" in p.cmdline()]
        engine.send_signal(signal.SIGKILL)
        answer = update.finished(60)
        assert answer.status_code == 502, answer.text
        message = answer.json()["error"]["message"]
        assert "restarted" in message and "generation resumed" in message, message
        wait_until(lambda: serving_version(stack) == "default", 30, "the engine's own weights")
        time.sleep(0.5)
    check_load(load, tokenizer, ["default"])
