"""HTTP workers refusing bad input in a whole stack (see ``test_http_worker.py``): every
bad request answers its 4xx status with an OpenAI-style error body, and the workers keep
serving and count their refusals.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.integration.harness.http_stack import MODEL, HttpStack
from tests.integration.harness.http_worker import (
    FRESH,
    HTTP_TIMEOUT,
    predictor,
    stack,
)
from tests.integration.harness.predictor import Predictor

pytestmark = pytest.mark.integration

#: The shared fixtures this module uses (imported, so listed).
__all__ = ["predictor", "stack"]


def _is_error_body(body: Any, status: int) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return (
        isinstance(error, dict)
        and isinstance(error.get("message"), str)
        and bool(error["message"])
        # OpenAI's string codes where it has one, else the status.
        and error.get("code") in (status, "model_not_found", "context_length_exceeded")
    )


#: (name, path, body or raw bytes, content type, expected status)
BAD_REQUESTS: list[tuple[str, str, Any, str, int]] = [
    ("invalid_json", "/generate", b'{"text": "unterminated', "application/json", 400),
    ("invalid_json_openai", "/v1/completions", b"{model: x}", "application/json", 400),
    ("missing_prompt", "/v1/completions", {"model": MODEL}, "application/json", 400),
    ("missing_text", "/generate", {"sampling_params": {}}, "application/json", 400),
    ("text_and_ids", "/generate", {"text": "a", "input_ids": [1]}, "application/json", 400),
    ("id_out_of_vocab", "/generate", {"input_ids": [5, 10**6]}, "application/json", 400),
    ("negative_id", "/v1/completions", {"model": MODEL, "prompt": [-1]}, "application/json", 400),
    (
        "min_above_max_new_tokens",
        "/generate",
        {"text": "a", "sampling_params": {"max_new_tokens": 2, "min_new_tokens": 3}},
        "application/json",
        400,
    ),
    (
        "min_tokens_above_max_tokens",
        "/v1/completions",
        {"model": MODEL, "prompt": "a", "max_tokens": 2, "min_tokens": 3},
        "application/json",
        400,
    ),
    (
        "negative_max_new_tokens",
        "/generate",
        {"text": "a", "sampling_params": {"max_new_tokens": -1}},
        "application/json",
        400,
    ),
    (
        "zero_max_tokens",
        "/v1/completions",
        {"model": MODEL, "prompt": "a", "max_tokens": 0},
        "application/json",
        400,
    ),
    (
        "longer_than_context",
        "/generate",
        {"input_ids": [7] * 8192, "sampling_params": {"max_new_tokens": 1}},
        "application/json",
        400,
    ),
    (
        "unknown_model",
        "/v1/completions",
        {"model": "gpt-0", "prompt": "a"},
        "application/json",
        404,
    ),
    ("n_zero", "/v1/completions", {"model": MODEL, "prompt": "a", "n": 0}, "application/json", 400),
    ("empty_prompt", "/v1/completions", {"model": MODEL, "prompt": ""}, "application/json", 400),
    ("empty_batch", "/generate", {"text": []}, "application/json", 400),
    (
        "logprobs",
        "/v1/completions",
        {"model": MODEL, "prompt": "a", "logprobs": 2},
        "application/json",
        400,
    ),
    ("not_an_object", "/generate", [1, 2, 3], "application/json", 400),
    (
        "embedding_unknown_model",
        "/v1/embeddings",
        {"model": "x", "input": "a"},
        "application/json",
        404,
    ),
    ("encode_without_input", "/encode", {}, "application/json", 400),
    ("huge_body", "/generate", b"{" + b" " * (17 * 1024 * 1024) + b"}", "application/json", 413),
    (
        "seed_beyond_int64",
        "/generate",
        {"text": "a", "sampling_params": {"seed": 2**70}},
        "application/json",
        400,
    ),
    (
        "stop_token_beyond_int32",
        "/v1/completions",
        {"model": MODEL, "prompt": "a", "stop_token_ids": [2**40]},
        "application/json",
        400,
    ),
    (
        "duplicate_rids_in_batch",
        "/generate",
        {"text": ["a", "b"], "rid": ["x", "x"]},
        "application/json",
        400,
    ),
    (
        "text_too_long_to_tokenize",
        "/generate",
        {"text": "word " * 400_000, "sampling_params": {"max_new_tokens": 1}},
        "application/json",
        400,
    ),
]


class TestBadInput:
    @pytest.mark.parametrize(
        ("path", "body", "content_type", "status"),
        [pytest.param(*case[1:], id=case[0]) for case in BAD_REQUESTS],
    )
    def test_bad_request_answers_an_openai_error(
        self, stack: HttpStack, path: str, body: Any, content_type: str, status: int
    ) -> None:
        """Bad input answers its 4xx status (never 422 or 500) with an OpenAI-style
        {"error": {"message", ...}} body."""
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content_type else {}
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            response = client.post(path, content=content, headers=headers)
        assert response.status_code == status, response.text
        assert _is_error_body(response.json(), status), response.text

    @pytest.mark.parametrize(
        "content_type",
        ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data", ""],
    )
    def test_a_body_not_declared_json_is_415(self, stack: HttpStack, content_type: str) -> None:
        """A JSON body labelled as a form (curl -d), text or multipart, or not labelled at
        all, is refused with 415 naming the fix: what a web page may send cross-origin
        without a preflight is never served."""
        body = json.dumps({"text": "curl style", "sampling_params": {"max_new_tokens": 5}})
        headers = {"Content-Type": content_type} if content_type else {}
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            response = client.post("/generate", content=body, headers=headers)
        assert response.status_code == 415, response.text
        assert "Content-Type: application/json" in response.json()["error"]["message"]

    def test_workers_keep_serving_after_bad_input(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """After every bad request above, both workers still run and answer correctly,
        and each counted its refusals by reason."""
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT, headers=FRESH) as client:
            for _, path, body, content_type, _ in BAD_REQUESTS:
                content = body if isinstance(body, bytes) else json.dumps(body).encode()
                headers = {"Content-Type": content_type} if content_type else {}
                assert client.post(path, content=content, headers=headers).status_code < 500
            for i in range(20):
                body = {"text": f"still fine {i}", "sampling_params": {"max_new_tokens": 3}}
                response = client.post("/generate", json=body)
                assert response.json()["text"] == predictor.text(f"still fine {i}", 3)
        stack.assert_running()
        for info in stack.worker_infos().values():
            assert info["worker"]["state"] == "serving"
        rejected: dict[str, int] = {}
        for info in stack.worker_infos().values():
            for reason, count in info["worker"]["counters"].get("http_rejected", {}).items():
                rejected[reason] = rejected.get(reason, 0) + count
        assert {"invalid_request", "invalid_prompt", "model_not_found", "body_too_large"} <= set(
            rejected
        ), rejected
