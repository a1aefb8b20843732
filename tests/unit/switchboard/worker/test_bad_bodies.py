"""The worker app refusing bad bodies before any request reaches the router: the real
``create_app`` served by uvicorn (httptools) on a loopback port, its link bound in a run
directory with no router behind it. Unknown fields are 400 naming them; bodies over the
limit, declared or chunked, are 413 in the worker's error shape and counted."""

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
from switchboard.worker.metrics import NO_METRICS
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


class TestUnknownFields:
    """A body naming a field no model has is a 400 naming it."""

    @pytest.mark.parametrize("path", list(BODIES))
    def test_unknown_top_level_field(
        self, worker: FastAPI, client: httpx.Client, path: str
    ) -> None:
        """``no_such_field`` on each endpoint: 400, the worker's error shape, ``param``
        and the message naming the field."""
        answer = client.post(path, json={**BODIES[path], "no_such_field": 1})
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["param"] == "no_such_field" and error["code"] == 400
        assert error["message"] == "no_such_field: Extra inputs are not permitted"
        assert error["type"] == "invalid_request_error"

    def test_unknown_sampling_param(self, client: httpx.Client) -> None:
        """A misspelt sampling parameter is named too, not silently lost."""
        body = {"text": "hi", "sampling_params": {"max_new_token": 2}}
        answer = client.post("/generate", json=body)
        assert answer.status_code == 400
        assert (
            "sampling_params.NativeSamplingParams.max_new_token"
            in (answer.json()["error"]["message"])
        )

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
        """A chunked body under the limit reaches validation (here: a 400 naming the
        unknown field), not a refusal."""
        body = json.dumps({"text": "hi", "no_such_field": "a" * 1000}).encode()
        answer = client.post(
            "/generate", content=chunked(body), headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == "no_such_field"
        assert rejected(worker, "body_too_large") == 0
