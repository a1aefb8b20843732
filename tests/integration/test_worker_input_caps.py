"""HTTP workers hardened against hostile input, in a whole stack (see
``test_http_worker.py``), through httpx and the official ``openai`` SDK: a lone surrogate
anywhere is a 400 naming it (streaming too, before any stream), a body not declared as
JSON is a 415, a request at every cap is served and one past a cap is a 400 naming it,
and a client sending requests at the caps leaves other clients' median latency within
2x of what it is without that client.
"""

from __future__ import annotations

import json
import random
import statistics
import string
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from openai.types import Completion

from switchboard.worker.caps import RequestCaps
from tests.integration.harness.http_stack import MODEL, HttpStack
from tests.integration.harness.http_worker import FRESH, HTTP_TIMEOUT, predictor, stack
from tests.integration.harness.polling import wait_until
from tests.integration.harness.predictor import Predictor

pytestmark = pytest.mark.integration

#: The shared fixtures this module uses (imported, so listed).
__all__ = ["predictor", "stack"]

CAPS = RequestCaps()
JSON = {"Content-Type": "application/json"}
#: Stop strings at both caps that the engine's output never contains.
_rng = random.Random(12)
STOPS = [
    "".join(_rng.choice(string.ascii_letters) for _ in range(CAPS.max_stop_chars))
    for _ in range(CAPS.max_stop_strings)
]


@pytest.fixture(scope="module")
def sdk(stack: HttpStack) -> Iterator[openai.OpenAI]:
    """The official SDK pointed at the stack, without retries."""
    with openai.OpenAI(
        base_url=f"{stack.base_url}/v1", api_key="unused", max_retries=0, timeout=60.0
    ) as client:
        yield client


def unused_ids(predictor: Predictor, count: int) -> list[int]:
    """``count`` token ids the engine never generates (outside its pool)."""
    pool = set(predictor.pool)
    ids = [i for i in range(predictor.tokenizer.vocab_size) if i not in pool][:count]
    assert len(ids) == count
    return ids


class TestSurrogates:
    """A lone surrogate is refused before anything is generated."""

    @pytest.mark.parametrize("stream", [False, True])
    def test_httpx_generate(self, stack: HttpStack, stream: bool) -> None:
        """``/generate`` with a surrogate deep in ``sampling_params``: 400 naming the
        path, JSON, never a 500 or a 200 stream carrying an error event."""
        raw = b'{"text": "hi", "stream": %s, "sampling_params": {"stop": ["ok", "\\udfff"]}}'
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            answer = client.post(
                "/generate", content=raw % (b"true" if stream else b"false"), headers=JSON
            )
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert error["param"] == "sampling_params"
        assert error["message"].startswith("sampling_params.stop.1: not valid Unicode")

    @pytest.mark.parametrize("stream", [False, True])
    def test_sdk_completion(self, sdk: openai.OpenAI, stream: bool) -> None:
        """The SDK (its encoder refuses lone surrogates, so the JSON text is given as
        another language's client would send it) raises BadRequestError naming the field,
        streaming or not."""
        # json.dumps writes the lone surrogate as the escape \ud800, as JavaScript does.
        body = json.dumps({"model": MODEL, "prompt": ["fine", "bad \ud800"], "stream": stream})
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.post(
                "/completions",
                content=body.encode(),
                cast_to=Completion,
                stream=stream,
                stream_cls=openai.Stream[Completion],
            )
        assert refused.value.status_code == 400
        assert "prompt.1: not valid Unicode: a lone surrogate \\ud800" in refused.value.message

    def test_sdk_embedding_key(self, sdk: openai.OpenAI) -> None:
        """A surrogate in a key is named by where the key is."""
        body = json.dumps({"model": MODEL, "input": "hi", "\udc00": 1})
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.post("/embeddings", content=body.encode(), cast_to=httpx.Response)
        assert 'a key of the body ("\\udc00") is not valid Unicode' in refused.value.message


class TestContentTypes:
    """Only JSON bodies are read: nothing a web page may send unasked is served."""

    @pytest.mark.parametrize(
        "headers",
        [{"Content-Type": "application/x-www-form-urlencoded"}, {"Content-Type": "text/plain"}, {}],
        ids=["form", "text", "none"],
    )
    @pytest.mark.parametrize("route", ["/generate", "/v1/completions", "/v1/embeddings", "/encode"])
    def test_httpx_refused_with_415(
        self, stack: HttpStack, route: str, headers: dict[str, str]
    ) -> None:
        """415 naming the fix, JSON, whatever the route."""
        body = {"text": "hi", "model": MODEL, "prompt": "hi", "input": "hi", "stream": True}
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            answer = client.post(route, content=json.dumps(body), headers=headers)
        assert answer.status_code == 415, answer.text
        assert "Content-Type: application/json" in answer.json()["error"]["message"]

    def test_multipart_refused_with_415(self, stack: HttpStack) -> None:
        """A multipart form (what an HTML form posts) is refused too."""
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            answer = client.post("/generate", files={"text": ("a.txt", b"hi")})
        assert answer.status_code == 415

    def test_sdk_with_a_wrong_content_type(self, sdk: openai.OpenAI) -> None:
        """The SDK made to send text/plain gets the 415 as an APIStatusError, streaming."""
        wrong = sdk.with_options(default_headers={"Content-Type": "text/plain"})
        with pytest.raises(openai.APIStatusError) as refused:
            wrong.completions.create(model=MODEL, prompt="hi", max_tokens=2, stream=True)
        assert refused.value.status_code == 415
        assert "Content-Type: application/json" in refused.value.message


class TestCaps:
    """A request at every cap is served exactly; one past a cap is refused naming it."""

    def test_generate_at_every_cap(self, stack: HttpStack, predictor: Predictor) -> None:
        """``max_prompts`` prompts, each with ``max_stop_strings`` stop strings of
        ``max_stop_chars`` and ``max_stop_token_ids`` stop ids, asking for exactly
        ``max_request_tokens`` (long prompts, few new tokens): every text is the
        predicted one; one token more is refused naming ``max_request_tokens``."""
        new_tokens = 8
        length = CAPS.max_request_tokens // CAPS.max_prompts - new_tokens
        prompts = [
            [10 + (i * 7 + j) % 3000 for j in range(length)] for i in range(CAPS.max_prompts)
        ]
        params = {
            "max_new_tokens": new_tokens,
            "stop": STOPS,
            "stop_token_ids": unused_ids(predictor, CAPS.max_stop_token_ids),
            "ignore_eos": True,
        }
        assert len(prompts) * (length + new_tokens) == CAPS.max_request_tokens
        body = {"input_ids": prompts, "sampling_params": params}
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client:
            answer = client.post("/generate", json=body)
            assert answer.status_code == 200, answer.text
            for prompt, result in zip(prompts, answer.json(), strict=True):
                assert result["text"] == predictor.text(prompt, new_tokens)
            past = client.post(
                "/generate", json={**body, "input_ids": [*prompts[:-1], [*prompts[-1], 7]]}
            )
        assert past.status_code == 400
        assert past.json()["error"]["cap"] == "max_request_tokens"

    def test_sdk_at_max_n_and_past_it(self, sdk: openai.OpenAI, predictor: Predictor) -> None:
        """``n`` = ``max_n`` is served (every choice the predicted text); one more is a
        BadRequestError naming ``max_n``; more prompts times n than ``max_prompts`` too."""
        done = sdk.completions.create(
            model=MODEL, prompt="n at the cap", max_tokens=4, n=CAPS.max_n
        )
        assert [choice.text for choice in done.choices] == [
            predictor.text("n at the cap", 4)
        ] * CAPS.max_n
        with pytest.raises(openai.BadRequestError, match=r"\(max_n\)"):
            sdk.completions.create(model=MODEL, prompt="x", max_tokens=4, n=CAPS.max_n + 1)
        with pytest.raises(openai.BadRequestError, match=r"\(max_prompts\)"):
            sdk.completions.create(model=MODEL, prompt=["x", "y"], max_tokens=4, n=CAPS.max_n)

    def test_sdk_past_the_stop_caps(self, sdk: openai.OpenAI) -> None:
        """One stop string too many, or one character too long: BadRequestError naming it."""
        with pytest.raises(openai.BadRequestError, match=r"\(max_stop_strings\)"):
            sdk.completions.create(model=MODEL, prompt="x", stop=[*STOPS, "one more"])
        with pytest.raises(openai.BadRequestError, match=r"\(max_stop_chars\)"):
            sdk.completions.create(model=MODEL, prompt="x", stop=STOPS[0] + "x", stream=True)

    def test_workers_keep_serving_and_counted_it_all(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """After all of the above both workers run and serve, and counted the refusals
        by reason."""
        with httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT, headers=FRESH) as client:
            for i in range(10):
                body = {"text": f"after {i}", "sampling_params": {"max_new_tokens": 3}}
                assert client.post("/generate", json=body).json()["text"] == predictor.text(
                    f"after {i}", 3
                )
        stack.assert_running()
        rejected: dict[str, int] = {}
        for info in stack.worker_infos().values():
            for reason, count in info["worker"]["counters"].get("http_rejected", {}).items():
                rejected[reason] = rejected.get(reason, 0) + count
        assert {"invalid_unicode", "unsupported_media_type", "over_cap"} <= set(rejected)


#: How long each phase of the latency comparison samples, and how many of each: every
#: shape twice, each phase some 17 (alone) and 26 (beside) short requests, about 135 and
#: 210 in all. (Phases twice as long gave 1.16x where these give 1.22x, on a 2x bound.)
ALONE_S, LOADED_S, ROUNDS = 0.75, 1.5, 8
#: The short request whose latency is measured.
SMALL_NEW_TOKENS = 8


@dataclass(frozen=True)
class CapsRequest:
    """One request at the caps: its shape's name, where it goes, its body, and whether
    it streams."""

    name: str
    path: str
    body: bytes
    stream: bool


def at_the_caps(predictor: Predictor) -> list[CapsRequest]:
    """Requests at every cap at once, in the shapes that cost the stack most: decoding
    (``max_prompts`` generations, as prompts or as ``n``, of half prompt and half new
    tokens, streamed), prefill (prompts making ``max_request_tokens`` with one new token
    each) and embedding (inputs making ``max_request_tokens``). Each generation has the
    most stop strings of the most characters and the most stop ids, none of which it
    produces."""
    count = CAPS.max_prompts
    half = CAPS.max_request_tokens // count // 2
    long = CAPS.max_request_tokens // count

    def ids(length: int) -> list[list[int]]:
        return [[10 + (i * 31 + j) % 3000 for j in range(length)] for i in range(count)]

    stop = {"stop": STOPS, "stop_token_ids": unused_ids(predictor, CAPS.max_stop_token_ids)}
    decode = {"max_new_tokens": half, "ignore_eos": True, **stop}
    prefill = {"max_new_tokens": 1, "ignore_eos": True, **stop}
    completion = {"model": MODEL, "prompt": ids(half)[0], "n": count, "max_tokens": half}
    streamed = {"stream": True}
    shapes: list[tuple[str, str, dict[str, Any], bool]] = [
        (
            "decode",
            "/generate",
            {"input_ids": ids(half), "sampling_params": decode} | streamed,
            True,
        ),
        (
            "decode n",
            "/v1/completions",
            {**completion, "ignore_eos": True, **stop} | streamed,
            True,
        ),
        ("prefill", "/generate", {"input_ids": ids(long - 1), "sampling_params": prefill}, False),
        ("embed", "/v1/embeddings", {"model": MODEL, "input": ids(long)}, False),
    ]
    return [
        CapsRequest(name, path, json.dumps(body).encode(), stream)
        for name, path, body, stream in shapes
    ]


class CapsClient:
    """A client that, while loading, sends one request of its shape after another; a
    streaming one it leaves (which aborts the request) when loading stops."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.shape: CapsRequest | None = None
        self.loading = threading.Event()
        #: Set once a request of the current loading is answered (its stream started).
        self.answered = threading.Event()
        self.finished = threading.Event()
        self.errors: list[str] = []
        self.sent = 0
        self._thread = threading.Thread(target=self._run, name="caps-client")

    def __enter__(self) -> CapsClient:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finished.set()
        self.loading.clear()
        self._thread.join(60.0)
        assert not self._thread.is_alive(), "the caps client did not stop"

    def load(self, shape: CapsRequest) -> None:
        """Start sending requests of ``shape``."""
        self.shape = shape
        self.answered.clear()
        self.loading.set()

    def _run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=HTTP_TIMEOUT) as client:
            while not self.finished.is_set():
                shape = self.shape
                if not self.loading.wait(0.05) or shape is None:
                    continue
                try:
                    self._send(client, shape)
                except httpx.HTTPError as exc:
                    self.errors.append(f"{shape.name}: {exc!r}")
                self.sent += 1

    def _send(self, client: httpx.Client, shape: CapsRequest) -> None:
        with client.stream("POST", shape.path, content=shape.body, headers=JSON) as answer:
            if answer.status_code != 200:
                self.errors.append(f"{shape.name}: {answer.status_code} {answer.read()[:200]!r}")
                return
            for _ in answer.iter_raw():
                self.answered.set()
                if shape.stream and not self.loading.is_set():
                    return  # closing the stream aborts the request in the engine
        self.answered.set()


def small_latencies(client: httpx.Client, seconds: float, start: int) -> list[float]:
    """Latencies of one short ``/generate`` after another, each on a fresh connection
    (so both workers serve them), for ``seconds``."""
    latencies = []
    deadline = time.monotonic() + seconds
    index = start
    while time.monotonic() < deadline:
        body = {"text": f"small {index}", "sampling_params": {"max_new_tokens": SMALL_NEW_TOKENS}}
        began = time.perf_counter()
        answer = client.post("/generate", json=body, headers=FRESH)
        latencies.append(time.perf_counter() - began)
        assert answer.status_code == 200, answer.text
        index += 1
    return latencies


def _ms(latencies: list[float]) -> float:
    return statistics.median(latencies) * 1000


class TestLatencyAtTheCaps:
    def test_a_client_at_the_caps_keeps_others_median_within_2x(
        self, stack: HttpStack, predictor: Predictor
    ) -> None:
        """Short requests' median latency while a client sends requests at every cap, one
        after another, is at most twice their median without it. The two are sampled in
        alternating phases of one run (alone, beside, alone, ...), so a change in the
        machine's load from other work affects both alike; each beside phase has the
        client send one shape of :func:`at_the_caps` (in turn) and starts once its first
        request is answered; an alone phase starts once the stack has nothing in flight."""
        shapes = at_the_caps(predictor)
        alone: list[float] = []
        beside: list[float] = []
        rounds: list[str] = []  # each round's two medians, for the printed figures

        def idle() -> bool:
            return not any(view["inflight"] for view in stack.worker_views().values())

        with (
            CapsClient(stack.base_url) as caps_client,
            httpx.Client(base_url=stack.base_url, timeout=HTTP_TIMEOUT) as client,
        ):
            small_latencies(client, 0.5, 0)  # warm up
            for round_ in range(ROUNDS):
                shape = shapes[round_ % len(shapes)]
                wait_until(idle, 30.0, "the stack to have nothing in flight")
                quiet = small_latencies(client, ALONE_S, len(alone) + len(beside))
                caps_client.load(shape)
                wait_until(
                    lambda: caps_client.answered.is_set() or caps_client.errors,
                    30.0,
                    f"the {shape.name} request at the caps to be answered",
                )
                busy = small_latencies(client, LOADED_S, len(alone) + len(quiet) + len(beside))
                caps_client.loading.clear()
                assert not caps_client.errors, caps_client.errors
                rounds.append(f"{shape.name} {_ms(quiet):.0f}/{_ms(busy):.0f}")
                alone += quiet
                beside += busy
        assert not caps_client.errors, caps_client.errors
        alone_ms, beside_ms = _ms(alone), _ms(beside)
        ratio = beside_ms / alone_ms
        print(
            f"\nshort /generate ({SMALL_NEW_TOKENS} tokens) median latency: alone "
            f"{alone_ms:.1f} ms (n={len(alone)}), beside a client at the caps "
            f"{beside_ms:.1f} ms (n={len(beside)}): {ratio:.2f}x; by round (alone/beside, "
            f"ms): {', '.join(rounds)}; the caps client sent {caps_client.sent} requests; "
            f"{CAPS}"
        )
        assert ratio <= 2.0, f"{beside_ms:.1f} ms beside vs {alone_ms:.1f} ms alone: {ratio:.2f}x"
