"""The caps on one request (:mod:`switchboard.worker.caps`): each accepted at its limit and
refused one past it, alone and through every endpoint of the served worker (no router
behind it: a request past a cap is refused before it would wait for one), and set by
the ``switchboard worker`` flags."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from router_core.worker_link import WorkerLinkSettings
from switchboard.cli import build_parser
from switchboard.text import Tokenizer
from switchboard.worker import cli as worker_cli
from switchboard.worker.app import create_app
from switchboard.worker.caps import CapExceeded, RequestCaps, prompt_count
from switchboard.worker.metrics import NO_METRICS
from switchboard.worker.settings import WorkerSettings
from tests.unit.httpkit.served import WAIT_S, served

MODEL = "switchboard-sim"
#: Small caps, so that the requests past them stay small too.
CAPS = RequestCaps(
    max_prompts=4,
    max_n=3,
    max_stop_strings=2,
    max_stop_chars=5,
    max_stop_token_ids=3,
    max_request_tokens=100,
)


def refused(check: Any, *args: Any, **kwargs: Any) -> CapExceeded:
    """The :class:`CapExceeded` that ``check(*args, **kwargs)`` raises."""
    with pytest.raises(CapExceeded) as caught:
        check(*args, **kwargs)
    return caught.value


class TestRequestCaps:
    """Each check passes at its cap and names the cap and its value past it."""

    def test_n(self) -> None:
        """``n`` up to ``max_n``."""
        CAPS.check_n(3)
        error = refused(CAPS.check_n, 4)
        assert (error.cap, error.limit, error.param) == ("max_n", 3, "n")
        assert str(error) == "n: 4 samples per prompt; at most 3 are accepted (max_n)"

    def test_prompts(self) -> None:
        """Prompts up to ``max_prompts``."""
        CAPS.check_generations(4, param="text")
        error = refused(CAPS.check_generations, 5, param="text")
        assert (error.cap, error.limit, error.param) == ("max_prompts", 4, "text")
        assert str(error).startswith("text: 5 prompts; a request may ask for at most 4")

    def test_prompts_times_n(self) -> None:
        """On ``/v1/completions`` each of ``n`` samples counts: prompts times n."""
        CAPS.check_generations(2, param="prompt", n=2)
        error = refused(CAPS.check_generations, 2, param="prompt", n=3)
        assert "2 prompts times n=3" in str(error) and error.cap == "max_prompts"

    def test_stop_strings(self) -> None:
        """Stop strings up to ``max_stop_strings``, each up to ``max_stop_chars``."""
        CAPS.check_stop(["abcde", "x"], [], at="sampling_params")
        many = refused(CAPS.check_stop, ["a", "b", "c"], [], at="sampling_params")
        assert (many.cap, many.limit, many.param) == ("max_stop_strings", 2, "sampling_params")
        assert str(many).startswith("sampling_params.stop: 3 stop strings; at most 2")
        long = refused(CAPS.check_stop, ["a", "abcdef"], [], at="sampling_params.1")
        assert (long.cap, long.limit, long.param) == ("max_stop_chars", 5, "sampling_params")
        assert str(long).startswith("sampling_params.1.stop.1: a stop string of 6 characters")

    def test_stop_token_ids(self) -> None:
        """Stop token ids up to ``max_stop_token_ids``; at the top level the field is named."""
        CAPS.check_stop([], [1, 2, 3], at="")
        error = refused(CAPS.check_stop, [], [1, 2, 3, 4], at="")
        assert (error.cap, error.limit, error.param) == ("max_stop_token_ids", 3, "stop_token_ids")
        assert str(error).startswith("stop_token_ids: 4 stop token ids; at most 3")

    def test_tokens(self) -> None:
        """Prompt plus new tokens over the generations up to ``max_request_tokens``."""
        CAPS.check_tokens(100, 4)
        error = refused(CAPS.check_tokens, 101, 4)
        assert (error.cap, error.limit, error.param) == ("max_request_tokens", 100, None)
        assert str(error).startswith("the request asks for 101 tokens")

    def test_a_cap_below_one_is_refused(self) -> None:
        """A cap of 0 would refuse everything: a settings error."""
        with pytest.raises(ValueError, match="max_stop_strings must be at least 1"):
            RequestCaps(max_stop_strings=0)

    @pytest.mark.parametrize(
        ("source", "count"),
        [("text", 1), ([5, 6, 7], 1), (["a", "b"], 2), ([[1], [2], [3]], 3), ([], 0)],
    )
    def test_prompt_count(self, source: Any, count: int) -> None:
        """A text or a token-id list is one prompt; a list of them is that many."""
        assert prompt_count(source) == count


class TestFlags:
    """The caps and the body switches are ``switchboard worker`` flags."""

    def test_flags_set_the_settings(self, tmp_path: Path) -> None:
        """Each cap's flag reaches the worker's settings; so do --accept-any-content-type
        and --reject-unknown-fields."""
        words = ["worker", "--run-dir", str(tmp_path), "--worker-id", "w0"]
        words += ["--max-prompts", "4", "--max-n", "3", "--max-stop-strings", "2"]
        words += ["--max-stop-chars", "5", "--max-stop-token-ids", "3"]
        words += ["--max-request-tokens", "100", "--accept-any-content-type"]
        words += ["--reject-unknown-fields"]
        settings = worker_cli.settings(build_parser("worker").parse_args(words))
        assert settings.caps == CAPS and settings.accept_any_content_type
        assert settings.reject_unknown_fields

    def test_switchboard_up_hands_them_to_the_workers(self, tmp_path: Path) -> None:
        """``switchboard up``'s settings of the same names reach every worker's flags."""
        from switchboard.supervisor.layout import stack_layout
        from switchboard.supervisor.settings import load_settings

        given = {field: str(getattr(CAPS, field)) for field in vars(CAPS)}
        switches = {"accept_any_content_type": "true", "reject_unknown_fields": "true"}
        settings = load_settings({**given, **switches})
        workers = [spec for spec in stack_layout(settings, tmp_path, 1) if spec.role == "worker"]
        assert workers
        for spec in workers:
            args = build_parser("worker").parse_args(list(spec.argv[3:]))
            assert worker_cli.settings(args).caps == CAPS and args.accept_any_content_type
            assert args.reject_unknown_fields

    def test_defaults(self, tmp_path: Path) -> None:
        """Without them: the documented defaults, and JSON content types only."""
        words = ["worker", "--run-dir", str(tmp_path), "--worker-id", "w0"]
        settings = worker_cli.settings(build_parser("worker").parse_args(words))
        assert settings.caps == RequestCaps() and not settings.accept_any_content_type
        assert not settings.reject_unknown_fields
        assert RequestCaps() == RequestCaps(
            max_prompts=16,
            max_n=16,
            max_stop_strings=16,
            max_stop_chars=64,
            max_stop_token_ids=256,
            max_request_tokens=32_768,
        )


@pytest.fixture(scope="module")
def worker(default_tokenizer: Tokenizer) -> Iterator[FastAPI]:
    """A worker app with :data:`CAPS` whose router never answers."""
    with tempfile.TemporaryDirectory(prefix="sb-unit-", dir="/tmp") as run_dir:
        settings = WorkerSettings(
            worker_id="w0",
            link=WorkerLinkSettings.in_run_dir(run_dir, "w0"),
            model_name=MODEL,
            caps=CAPS,
        )
        yield create_app(settings, default_tokenizer, NO_METRICS)


@pytest.fixture(scope="module")
def client(worker: FastAPI) -> Iterator[httpx.Client]:
    """A client of the served worker."""
    with served(worker) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
        yield client


#: (endpoint, body one past a cap, the cap, the param named)
PAST_CAPS: list[tuple[str, dict[str, Any], str, str | None]] = [
    ("/generate", {"text": ["a"] * 5}, "max_prompts", "text"),
    ("/generate", {"input_ids": [[7]] * 5, "stream": True}, "max_prompts", "input_ids"),
    (
        "/generate",
        {"text": "a", "sampling_params": {"stop": ["a", "b", "c"]}},
        "max_stop_strings",
        "sampling_params",
    ),
    (
        "/generate",
        {"text": "a", "sampling_params": {"stop": "abcdef"}},
        "max_stop_chars",
        "sampling_params",
    ),
    (
        "/generate",
        {"text": ["a", "b"], "sampling_params": [{}, {"stop_token_ids": [1, 2, 3, 4]}]},
        "max_stop_token_ids",
        "sampling_params",
    ),
    (
        "/generate",
        {"input_ids": [[7] * 40] * 2, "sampling_params": {"max_new_tokens": 11}},
        "max_request_tokens",
        None,
    ),
    ("/v1/completions", {"prompt": ["a"] * 5}, "max_prompts", "prompt"),
    ("/v1/completions", {"prompt": ["a", "b"], "n": 3}, "max_prompts", "prompt"),
    ("/v1/completions", {"prompt": "a", "n": 4, "best_of": 4}, "max_n", "n"),
    (
        "/v1/completions",
        {"prompt": "a", "stop": ["a", "b", "c"], "stream": True},
        "max_stop_strings",
        "stop",
    ),
    ("/v1/completions", {"prompt": "a", "stop": "abcdef"}, "max_stop_chars", "stop"),
    (
        "/v1/completions",
        {"prompt": "a", "stop_token_ids": [1, 2, 3, 4]},
        "max_stop_token_ids",
        "stop_token_ids",
    ),
    ("/v1/completions", {"prompt": [7] * 10, "n": 2, "max_tokens": 41}, "max_request_tokens", None),
    ("/v1/embeddings", {"input": ["a"] * 5}, "max_prompts", "input"),
    ("/v1/embeddings", {"input": [[7] * 51, [7] * 50]}, "max_request_tokens", None),
    ("/encode", {"text": ["a"] * 5}, "max_prompts", "text"),
    ("/encode", {"input_ids": [[7] * 101]}, "max_request_tokens", None),
]


class TestCapsServed:
    """Each endpoint refuses a request one past a cap, before any engine request."""

    @pytest.mark.parametrize(
        ("route", "body", "cap", "param"),
        [pytest.param(*case, id=f"{case[0]}:{case[2]}:{i}") for i, case in enumerate(PAST_CAPS)],
    )
    def test_past_a_cap_is_400_naming_it(
        self,
        worker: FastAPI,
        client: httpx.Client,
        route: str,
        body: dict[str, Any],
        cap: str,
        param: str | None,
    ) -> None:
        """400 whose message names the cap, with ``cap`` and ``limit`` (its value) and
        ``param``, counted as ``over_cap``; a streaming request gets it before any stream."""
        if route.startswith("/v1"):
            body = {"model": MODEL, **body}
        before = int(worker.state.link.counters.get("http_rejected", "over_cap"))
        answer = client.post(
            route, content=json.dumps(body), headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        limit = getattr(CAPS, cap)
        assert (error["cap"], error["limit"], error["param"]) == (cap, limit, param)
        assert f"at most {limit}" in error["message"] and f"({cap})" in error["message"]
        assert int(worker.state.link.counters.get("http_rejected", "over_cap")) == before + 1
