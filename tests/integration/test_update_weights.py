"""Live weight updates against a real ``switchboard up`` under streaming load.

Five swaps in each pause mode while clients stream generations: every text is predicted
from the built-in engine's token rule under the version that made each token (its seed
is ``version_seed`` of the version), so a request that spans a swap is the old
version's tokens then the new one's, and ``meta_info.weight_version`` names the version
of its last token; in ``abort`` mode the requests in flight end with finish reason
abort, their tokens all the old version's. A failed update names the file and keeps the
old weights serving. ``flush_cache`` answers from the API, the CLI and SGLang's path on
the serving port, refused (409, naming the request) while one runs unpaused.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from switchboard.text import load_tokenizer
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import wait_until
from tests.integration.harness.sse import StreamThread
from tests.integration.harness.weight_load import CLIENTS, Load, explains, predictor

pytestmark = pytest.mark.integration

STEP_TIME_S = 0.01
#: Seconds between two swaps, so no request spans more than one.
GAP_S = 0.6
SWAPS = 5


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    with admin_stack(tmp_path_factory, workers=2, step_time=STEP_TIME_S) as running:
        yield running


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer()


def update(stack: AdminStack, **body: Any) -> httpx.Response:
    with stack.client(timeout=90) as client:
        return client.post("/api/update_weights", json=body)


def current(stack: AdminStack) -> str:
    with stack.client(stack.viewer_token) as client:
        load = client.get("/api/load").json()["load"]
    return str(load["weight_version"]) or "default"


@pytest.mark.parametrize("mode", ["retract", "in_place", "abort"])
def test_five_swaps_under_streaming_load(stack: AdminStack, tokenizer: Any, mode: str) -> None:
    """Five updates in ``mode``: each answered 200 with its version; every streamed text
    is predicted from the versions that made its tokens; nothing is left paused."""
    chain = [current(stack)]
    with Load(stack.base_url, f"swap {mode}") as load:
        for swap in range(SWAPS):
            time.sleep(GAP_S)
            version = f"{mode}-{swap}"
            answer = update(stack, version=version, mode=mode, timeout_s=10)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert (body["version"], body["previous_version"] or "default") == (version, chain[-1])
            assert body["paused"]["complete"] and body["resumed"]["complete"], body
            chain.append(version)
        time.sleep(GAP_S)
    assert load.failures == []
    assert len(load.done) >= SWAPS * CLIENTS, len(load.done)
    problems = [p for p in (explains(tokenizer, done, chain) for done in load.done) if p]
    assert problems == [], problems[:5]
    versions = {done.meta["weight_version"] for done in load.done}
    assert set(chain[1:]) <= versions, (versions, chain)
    aborted = [d for d in load.done if d.meta["finish_reason"]["type"] == "abort"]
    assert bool(aborted) == (mode == "abort"), len(aborted)
    with stack.client(stack.viewer_token) as client:
        status = client.get("/api/status").json()
    assert status["paused"] is False


def test_a_failed_update_keeps_the_old_weights(stack: AdminStack, tokenizer: Any) -> None:
    """A model file that is not there: 400 naming it, the old version serves on and
    generation resumed."""
    before = current(stack)
    answer = update(stack, model="/no/such/weights.gguf", version="never", mode="retract")
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert "/no/such/weights.gguf" in message and "no readable file" in message, message
    assert "generation resumed" in message
    assert current(stack) == before
    thread = StreamThread(
        stack.base_url,
        {"text": "after a failed update", "sampling_params": {"max_new_tokens": 6}, "stream": True},
    ).start()
    seen = thread.finish(30)
    assert seen.text == predictor(tokenizer, before).text("after a failed update", 6)
    assert seen.events[-1]["meta_info"]["weight_version"] == before


def test_update_weights_from_the_cli_and_sglangs_path(stack: AdminStack) -> None:
    """``switchboard update-weights --version`` and SGLang's /update_weights_from_disk
    (``model_path``, ``weight_version``) on the serving port swap alike."""
    cli = [sys.executable, "-m", "switchboard.cli", "update-weights", "--url", stack.admin_url]
    done = subprocess.run(
        [*cli, "--version", "cli-1", "--mode", "in_place", "--token", stack.operator_token],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "cli-1" in done.stdout
    assert current(stack) == "cli-1"
    with httpx.Client(base_url=stack.base_url, timeout=60, trust_env=False) as serving:
        answer = serving.post(
            "/update_weights_from_disk",
            json={"model_path": "", "weight_version": "sglang-1", "load_format": "auto"},
            headers=stack.headers(stack.operator_token),
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "ok" and answer.json()["version"] == "sglang-1"
    assert current(stack) == "sglang-1"


def test_flush_cache_everywhere_and_refused_while_running(stack: AdminStack) -> None:
    """200 from the API, the CLI and SGLang's /flush_cache (GET); 409 naming the running
    request while it runs unpaused."""
    with stack.client() as client:
        assert client.post("/api/flush_cache").json() == {"flushed": True, "dropped_tokens": 0}
    cli = [sys.executable, "-m", "switchboard.cli", "flush-cache", "--url", stack.admin_url]
    done = subprocess.run(
        [*cli, "--token", stack.operator_token],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "flushed" in done.stdout, done.stderr
    with httpx.Client(base_url=stack.base_url, timeout=30, trust_env=False) as serving:
        answer = serving.get("/flush_cache", headers=stack.headers(stack.operator_token))
    assert answer.status_code == 200 and answer.json()["message"] == "Cache flushed.", answer.text
    long = StreamThread(
        stack.base_url,
        {
            "text": "a long one",
            "rid": "flush-blocker",
            "sampling_params": {"max_new_tokens": 400, "ignore_eos": True},
            "stream": True,
        },
    ).start()
    wait_until(lambda: long.seen.completion_tokens > 2, 20, "the long request to run")
    with stack.client() as client:
        refused = client.post("/api/flush_cache")
    assert refused.status_code == 409, refused.text
    assert "flush-blocker" in refused.json()["error"]["message"]
    long.finish(60)
