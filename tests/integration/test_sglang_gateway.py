"""SGLang's own gateway in front of the workers: ``sglang-router`` (the PyPI package, a
real Rust binary) launched with ``--worker-urls`` at a real ``switchboard up``.

The gateway adds fields of SGLang's ``GenerateReqInput`` to every ``/generate`` it
forwards (``model``, ``background``, ``no_logs``, ``return_bytes``…); the workers must
take them. Each answer that comes back through the gateway is checked against the
built-in engine's rules, stream and not, native and OpenAI.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from switchboard.text import load_tokenizer
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import missing, wait_until
from tests.integration.harness.predictor import Predictor

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

MODEL = "switchboard-sim"
#: Seconds the gateway has to find the workers healthy.
READY_S = 60.0


def _gateway_binary() -> str:
    found = shutil.which("sglang-router", path=str(Path(sys.executable).parent))
    if found is None:
        missing("sglang-router (pip install -e '.[test]')")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """Two workers behind one port, the built-in engine."""
    with admin_stack(tmp_path_factory, workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def gateway(stack: AdminStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sglang-router launch --worker-urls <the workers>`` on a free loopback port; its
    URL once it answers a generation. Stopped with SIGTERM (killed after 10 s)."""
    binary = _gateway_binary()
    port = free_port()
    log_path = tmp_path_factory.mktemp("sglang-router") / "sglang-router.log"
    argv = [binary, "launch", "--worker-urls", stack.base_url]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warn"]
    url = f"http://127.0.0.1:{port}"
    body = {"text": "ready?", "sampling_params": {"max_new_tokens": 1}}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"sglang-router exited {process.returncode}: {_tail(log_path)}")
        try:
            reply = httpx.post(f"{url}/generate", json=body, timeout=5.0, trust_env=False)
        except httpx.HTTPError:
            return False
        return reply.status_code == 200

    try:
        wait_until(answers, READY_S, "sglang-router forwarding to the workers")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _tail(path: Path) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-20:])


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    """The built-in engine's texts, from the tokenizer every worker loads."""
    return Predictor(load_tokenizer())


def _events(reply: httpx.Response) -> list[dict[str, object]]:
    events = []
    for line in reply.iter_lines():
        if line.startswith("data: ") and line != "data: [DONE]":
            events.append(json.loads(line.removeprefix("data: ")))
    return events


class TestThroughTheGateway:
    def test_generate(self, gateway: str, predictor: Predictor) -> None:
        """A non-streaming /generate: the predicted text and token counts, length."""
        prompt = "through the gateway, not streaming"
        body = {"text": prompt, "sampling_params": {"max_new_tokens": 12, "temperature": 0}}
        reply = httpx.post(f"{gateway}/generate", json=body, timeout=30.0, trust_env=False)
        assert reply.status_code == 200, reply.text
        answer = reply.json()
        assert answer["text"] == predictor.text(prompt, 12)
        meta = answer["meta_info"]
        assert meta["completion_tokens"] == 12
        assert meta["prompt_tokens"] == len(predictor.prompt_ids(prompt))
        assert meta["finish_reason"]["type"] == "length"

    def test_generate_streaming(self, gateway: str, predictor: Predictor) -> None:
        """A streaming /generate: SGLang's cumulative texts, ending in the predicted one."""
        prompt = "through the gateway, streaming"
        body = {"text": prompt, "stream": True, "sampling_params": {"max_new_tokens": 10}}
        with httpx.stream(
            "POST", f"{gateway}/generate", json=body, timeout=30.0, trust_env=False
        ) as reply:
            assert reply.status_code == 200, reply.read()
            events = _events(reply)
        texts = [str(event["text"]) for event in events]
        assert texts and texts[-1] == predictor.text(prompt, 10)
        assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))

    def test_generate_with_n(self, gateway: str, predictor: Predictor) -> None:
        """n=2 (the gateway takes one prompt per /generate): a batch of two answers, each
        the prompt's text (the built-in engine's text depends on the prompt alone)."""
        prompt = "gateway, two samples"
        body = {"text": prompt, "sampling_params": {"max_new_tokens": 6, "n": 2}}
        reply = httpx.post(f"{gateway}/generate", json=body, timeout=30.0, trust_env=False)
        assert reply.status_code == 200, reply.text
        texts = [item["text"] for item in reply.json()]
        assert texts == [predictor.text(prompt, 6)] * 2

    def test_completions(self, gateway: str, predictor: Predictor) -> None:
        """/v1/completions through the gateway, as the openai SDK's body."""
        prompt = "gateway completion"
        body = {"model": MODEL, "prompt": prompt, "max_tokens": 8}
        reply = httpx.post(f"{gateway}/v1/completions", json=body, timeout=30.0, trust_env=False)
        assert reply.status_code == 200, reply.text
        [choice] = reply.json()["choices"]
        assert choice["text"] == predictor.text(prompt, 8)
        assert choice["finish_reason"] == "length"

    def test_chat_completions(self, gateway: str) -> None:
        """/v1/chat/completions through the gateway, streaming and not: the same answer
        the workers give directly (its text is the chat template's prompt's)."""
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "through the gateway"}],
            "max_tokens": 7,
        }
        reply = httpx.post(
            f"{gateway}/v1/chat/completions", json=body, timeout=30.0, trust_env=False
        )
        assert reply.status_code == 200, reply.text
        [choice] = reply.json()["choices"]
        assert choice["finish_reason"] == "length" and choice["message"]["role"] == "assistant"
        with httpx.stream(
            "POST",
            f"{gateway}/v1/chat/completions",
            json={**body, "stream": True},
            timeout=30.0,
            trust_env=False,
        ) as streamed:
            assert streamed.status_code == 200, streamed.read()
            chunks = _events(streamed)
        text = "".join(
            str(chunk["choices"][0]["delta"].get("content") or "")  # type: ignore[index]
            for chunk in chunks
            if chunk.get("choices")
        )
        assert text == choice["message"]["content"]
