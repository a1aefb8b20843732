"""The worker app refusing bad bodies before any request reaches the router: the real
``create_app`` served by uvicorn (httptools) on a loopback port, its link bound in a run
directory with no router behind it. Unknown fields are ignored and counted (or, with
``reject_unknown_fields``, 400 naming them); bodies over the limit, declared or chunked,
are 413 in the worker's error shape and counted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from router_core.worker_link import WorkerLinkSettings
from switchboard.text import Tokenizer
from switchboard.worker.app import create_app
from switchboard.worker.metrics import NO_METRICS, Metrics
from switchboard.worker.settings import WorkerSettings
from tests.unit.httpkit.served import WAIT_S, served

MODEL = "switchboard-sim"
LIMIT = 32 * 1024
#: A valid body of each JSON endpoint.
BODIES: dict[str, dict[str, Any]] = {
    "/generate": {"text": "hi", "sampling_params": {"max_new_tokens": 2}},
    "/v1/completions": {"model": MODEL, "prompt": "hi", "max_tokens": 2},
    "/v1/embeddings": {"model": MODEL, "input": "hi"},
    "/encode": {"text": "hi"},
}


@pytest.fixture
def worker(default_tokenizer: Tokenizer, run_dir: Path) -> FastAPI:
    """A worker app with a 32 KiB body limit whose router never answers."""
    settings = WorkerSettings(
        worker_id="w0",
        link=WorkerLinkSettings.in_run_dir(run_dir, "w0"),
        model_name=MODEL,
        max_body_bytes=LIMIT,
    )
    return create_app(settings, default_tokenizer, NO_METRICS)


@pytest.fixture
def client(worker: FastAPI) -> Iterator[httpx.Client]:
    """A client of the served worker."""
    with served(worker) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
        yield client


def rejected(worker: FastAPI, reason: str) -> int:
    """How many refusals the worker counted under ``reason``."""
    return int(worker.state.link.counters.get("http_rejected", reason))


def chunked(data: bytes) -> Iterator[bytes]:
    """``data`` in 4 KiB pieces, so httpx sends it chunked."""
    for start in range(0, len(data), 4096):
        yield data[start : start + 4096]


class RecordingMetrics(Metrics):
    """Metrics off, but the ignored fields reported are kept."""

    def __init__(self) -> None:
        self.ignored: list[tuple[str, str]] = []

    def ignored_field(self, handler: str, name: str) -> None:
        self.ignored.append((handler, name))


def _strict_worker(default_tokenizer: Tokenizer, run_dir: Path) -> FastAPI:
    settings = WorkerSettings(
        worker_id="w0",
        link=WorkerLinkSettings.in_run_dir(run_dir, "w0"),
        model_name=MODEL,
        reject_unknown_fields=True,
    )
    return create_app(settings, default_tokenizer, NO_METRICS)


class TestUnknownFields:
    """By default a field no model names is ignored and counted; with
    ``reject_unknown_fields`` it is a 400 naming it."""

    @pytest.mark.parametrize("path", list(BODIES))
    def test_ignored_and_counted_by_default(
        self, default_tokenizer: Tokenizer, run_dir: Path, path: str
    ) -> None:
        """``no_such_field`` (top level and nested) does not stop validation: the body
        goes on to the prompt check (an empty prompt: 400 saying so, not naming the
        field), and each ignored field is reported under the route, once per request."""
        metrics = RecordingMetrics()
        settings = WorkerSettings(
            worker_id="w0", link=WorkerLinkSettings.in_run_dir(run_dir, "w0"), model_name=MODEL
        )
        app = create_app(settings, default_tokenizer, metrics)
        body = {**BODIES[path], "no_such_field": None, "also_unknown": {"x": 1}}
        prompt_field = next(key for key in ("text", "prompt", "input") if key in body)
        body[prompt_field] = ""
        if path == "/generate":
            body["sampling_params"] = {**body["sampling_params"], "max_new_token": 2}
        with served(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
            answer = client.post(path, json=body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"] == "the prompt is empty"
        expected = [(path, "no_such_field"), (path, "also_unknown")]
        if path == "/generate":
            expected.append((path, "sampling_params.max_new_token"))
        assert sorted(metrics.ignored) == sorted(expected)

    @pytest.mark.parametrize("path", list(BODIES))
    def test_refused_when_rejecting(
        self, default_tokenizer: Tokenizer, run_dir: Path, path: str
    ) -> None:
        """``no_such_field`` on each endpoint: 400, the worker's error shape, ``param``
        and the message naming the field."""
        app = _strict_worker(default_tokenizer, run_dir)
        with served(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
            answer = client.post(path, json={**BODIES[path], "no_such_field": 1})
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["param"] == "no_such_field" and error["code"] == 400
        assert error["message"] == "no_such_field: Extra inputs are not permitted"
        assert error["type"] == "invalid_request_error"

    def test_unknown_sampling_param_when_rejecting(
        self, default_tokenizer: Tokenizer, run_dir: Path
    ) -> None:
        """A misspelt sampling parameter is named where it is, in the client's terms."""
        app = _strict_worker(default_tokenizer, run_dir)
        body = {"text": "hi", "sampling_params": {"max_new_token": 2}}
        with served(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
            answer = client.post("/generate", json=body)
        assert answer.status_code == 400
        assert answer.json()["error"]["message"] == (
            "sampling_params.max_new_token: Extra inputs are not permitted"
        )

    def test_a_wrong_sampling_value_names_the_field_alone(self, client: httpx.Client) -> None:
        """A refused value inside ``sampling_params`` names the field in the client's
        terms, not the branches of the union it could have been (object or list)."""
        body = {"text": "hi", "sampling_params": {"n": "two"}}
        answer = client.post("/generate", json=body)
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["message"] == (
            "sampling_params.n: Input should be a valid integer, unable to parse string as "
            "an integer"
        )
        assert error["param"] == "sampling_params"

    def test_unsupported_value(self, client: httpx.Client) -> None:
        """A known field this stack cannot honour, given a value, is a 400 saying so."""
        answer = client.post("/generate", json={"text": "hi", "lora_path": "adapter"})
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["message"] == "lora_path: not supported by this server: LoRA adapters"
        assert error["param"] == "lora_path"


class TestBodyLimit:
    """Bodies over ``max_body_bytes`` are 413, declared or chunked, and counted."""

    @pytest.mark.parametrize("sent", ["declared", "chunked"])
    @pytest.mark.parametrize("path", list(BODIES))
    def test_oversized_body_is_413(
        self, worker: FastAPI, client: httpx.Client, path: str, sent: str
    ) -> None:
        """A JSON body past the limit: 413 ``request body exceeds N bytes`` in the
        worker's shape, counted once under ``body_too_large``."""
        body = json.dumps({**BODIES[path], "user": "a" * LIMIT}).encode()
        content = body if sent == "declared" else chunked(body)
        answer = client.post(path, content=content, headers={"Content-Type": "application/json"})
        assert answer.status_code == 413
        assert answer.json() == {
            "error": {
                "message": f"request body exceeds {LIMIT} bytes",
                "type": "invalid_request_error",
                "param": None,
                "code": 413,
            }
        }
        assert rejected(worker, "body_too_large") == 1
        assert rejected(worker, "http_400") == 0

    def test_chunked_body_within_the_limit_is_validated(
        self, worker: FastAPI, client: httpx.Client
    ) -> None:
        """A chunked body under the limit reaches validation (here: a 400 naming a
        wrongly typed field), not a refusal."""
        body = json.dumps({"text": "hi", "stream": "a" * 1000}).encode()
        answer = client.post(
            "/generate", content=chunked(body), headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == "stream"
        assert rejected(worker, "body_too_large") == 0


class TestLogprobsNeedTheEngine:
    """Logprobs asked of an engine that does not list the feature (here: none has
    reported yet) are a 400 naming the field, never an answer without them."""

    @pytest.mark.parametrize(
        ("path", "body", "param"),
        [
            ("/generate", {"text": "hi", "return_logprob": True}, "return_logprob"),
            ("/v1/completions", {"model": MODEL, "prompt": "hi", "logprobs": 0}, "logprobs"),
            (
                "/v1/chat/completions",
                {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "logprobs": True},
                "logprobs",
            ),
        ],
    )
    def test_refused_naming_the_field(
        self, client: httpx.Client, path: str, body: dict[str, Any], param: str
    ) -> None:
        answer = client.post(path, json=body)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["param"] == param
        assert "does not produce logprobs" in error["message"]

    def test_prompt_logprobs_are_refused(self, client: httpx.Client) -> None:
        """SGLang's prompt logprobs (logprob_start_len >= 0) are not served."""
        body = {"text": "hi", "return_logprob": True, "logprob_start_len": 0}
        answer = client.post("/generate", json=body)
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == "logprob_start_len"
