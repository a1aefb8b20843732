"""The worker's body seam (:mod:`switchboard.worker.json_body`): JSON content types only,
and no string that is not Unicode text past it.

The decoder is tested alone, then the real ``create_app`` served by uvicorn on a loopback
port with no router behind it (every case here is refused before a request would wait
for one): a lone surrogate in any string or key of any endpoint's body, however deep, is
a 400 naming where it is, streaming requests included; a body not declared as JSON is a
415 saying what to send, unless the worker accepts any content type.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from router_core.worker_link import WorkerLinkSettings
from switchboard.text import Tokenizer
from switchboard.worker import json_body
from switchboard.worker.app import create_app
from switchboard.worker.json_body import (
    InvalidBody,
    InvalidUnicode,
    decode_json_body,
    is_json_media_type,
)
from switchboard.worker.metrics import NO_METRICS
from switchboard.worker.schemas import (
    CompletionBody,
    EmbeddingBody,
    EncodeBody,
    GenerateBody,
    NativeSamplingParams,
)
from switchboard.worker.settings import WorkerSettings
from tests.unit.httpkit.served import WAIT_S, served

MODEL = "switchboard-sim"
JSON = {"Content-Type": "application/json"}
#: A body of each endpoint giving every field that can hold text (checked below), nested.
FULL_BODIES: dict[str, dict[str, Any]] = {
    "/generate": {
        "text": ["one", "two"],
        "rid": ["r1", "r2"],
        "sampling_params": {
            "stop": ["s1", "s2"],
            "stop_regex": ["re"],
            "json_schema": "{}",
            "regex": "r",
            "ebnf": "e",
            "structural_tag": "t",
            "logit_bias": {"12": 1.0},
            "custom_params": {"k": {"deep": ["v"]}},
        },
        "image_data": ["img"],
        "video_data": {"v": "x"},
        "audio_data": "aud",
        "modalities": ["text"],
        "lora_path": ["lora", None],
        "custom_logit_processor": "clp",
        "bootstrap_host": ["h"],
        "return_hidden_states": ["x"],
        "session_params": {"id": "s"},
        "input_embeds": [["e"]],
        "model": "m",
        "lora_id": "l",
        "session_id": "s",
        "bootstrap_pair_key": "k",
        "cache_salt": "c",
        "extra_key": ["k"],
        "conversation_id": "c",
        "routing_key": "r",
        "http_worker_ipc": "ipc",
        "custom_labels": {"team": "t"},
        "external_trace_header": {"traceparent": "t"},
        "kv_router_hint": {"source_control_endpoint": "e"},
        "positional_embed_overrides": ["p"],
        "mm_hashes": ["h"],
        "mm_content_hashes": [["h"]],
        "encoder_urls": ["u"],
        "images_config": {"k": "v"},
        "video_config": {"k": "v"},
        "num_items_assigned": {"image": [1]},
    },
    "/encode": {
        "text": "one",
        "rid": "r",
        "image_data": "i",
        "video_data": "v",
        "audio_data": "a",
        "modalities": ["text"],
        "lora_path": "l",
        "lora_id": "l",
        "model": "m",
        "sampling_params": {"k": "v"},
    },
    "/v1/completions": {
        "model": MODEL,
        "prompt": ["one", "two"],
        "stop": ["s"],
        "user": "u",
        "logit_bias": {"5": 1},
        "suffix": "sfx",
        "stop_regex": ["r"],
        "json_schema": "{}",
        "regex": "r",
        "ebnf": "e",
        "response_format": {"type": "json_schema", "schema": {"a": "b"}},
        "lora_path": "l",
    },
    "/v1/embeddings": {"model": MODEL, "input": ["one"], "encoding_format": "float", "user": "u"},
}
MODELS: dict[str, type[BaseModel]] = {
    "/generate": GenerateBody,
    "/encode": EncodeBody,
    "/v1/completions": CompletionBody,
    "/v1/embeddings": EmbeddingBody,
}


def text_fields(model: type[BaseModel]) -> set[str]:
    """The fields of ``model`` whose type admits a string somewhere (as a value or a key)."""
    return {
        name
        for name, field in model.model_fields.items()
        if any(word in repr(field.annotation) for word in ("str", "Any", "Literal"))
    }


JsonPath = tuple[str | int, ...]


def text_positions(value: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, str | None]]:
    """Every string in ``value`` as ``(path, None)`` and every object key as ``(path of
    its object, key)``."""
    if isinstance(value, str):
        yield path, None
    elif isinstance(value, dict):
        for key, child in value.items():
            yield path, key
            yield from text_positions(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from text_positions(child, (*path, index))


def poisoned(body: Any, path: JsonPath, key: str | None) -> Any:
    """A copy of ``body`` with a lone surrogate in the string at ``path``, or in ``key``
    of the object at ``path``."""
    if not path:
        if key is None:
            return "x\ud800y"
        return {(k + "\udc00" if k == key else k): v for k, v in body.items()}
    head, *rest = path
    copy = dict(body) if isinstance(body, dict) else list(body)
    copy[head] = poisoned(body[head], tuple(rest), key)  # type: ignore[index]
    return copy


def expected_start(path: JsonPath, key: str | None) -> str:
    """How the refusal of :func:`poisoned` ``(path, key)`` begins."""
    dotted = ".".join(str(part) for part in path)
    if key is None:
        return f"{dotted}: not valid Unicode: a lone surrogate \\ud800 at character 1"
    return f'a key of {dotted or "the body"} ("{key}\\udc00") is not valid Unicode'


CASES = [
    pytest.param(route, path, key, id=f"{route}:{'.'.join(map(str, path))}:{key or 'value'}")
    for route, body in FULL_BODIES.items()
    for path, key in text_positions(body)
]


class TestTheCasesCoverEveryField:
    """The bodies above hold every text field of every endpoint, so the cases below do."""

    @pytest.mark.parametrize("route", list(FULL_BODIES))
    def test_every_text_field_is_in_the_full_body(self, route: str) -> None:
        """Each field whose type admits text is given in the endpoint's full body."""
        assert text_fields(MODELS[route]) <= set(FULL_BODIES[route])

    def test_every_sampling_text_field_is_given(self) -> None:
        """So is each text field of SGLang's ``sampling_params``."""
        assert text_fields(NativeSamplingParams) <= set(FULL_BODIES["/generate"]["sampling_params"])


class TestDecodeJsonBody:
    """:func:`decode_json_body` alone."""

    @pytest.mark.parametrize(
        "raw",
        [
            b'{"text": "hello", "n": 2}',
            '{"text": "caf\u00e9 \U0001f600 \\ud83d\\ude00 \\u00e9"}'.encode(),
            b'{"seed": 123456789012345678901234567890, "x": [1.5, -0, null, true]}',
            b'  [1, {"a": {}}]  ',
        ],
    )
    def test_a_good_body_decodes_as_json_does(self, raw: bytes) -> None:
        """Text, surrogate pairs (escaped or not), big integers: the same value as the
        standard library's."""
        assert decode_json_body(raw) == json.loads(raw)

    def test_a_byte_order_mark_is_skipped(self) -> None:
        """A UTF-8 BOM before the JSON is ignored (RFC 8259 allows a parser to)."""
        assert decode_json_body(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}

    def test_a_good_body_is_never_walked(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Only a refused body is searched for its bad string, in Python: a good one is
        decoded once, by the C decoder that refuses lone surrogates itself."""

        def walked(value: Any) -> None:
            raise AssertionError("a good body was walked")

        monkeypatch.setattr(json_body, "invalid_string_at", walked)
        decode_json_body(json.dumps({"text": ["w\u00f6rd"] * 10_000}).encode())

    @pytest.mark.parametrize(("route", "path", "key"), CASES)
    def test_a_lone_surrogate_anywhere_is_named(
        self, route: str, path: JsonPath, key: str | None
    ) -> None:
        """A lone surrogate in any string or key, escaped or sent as (invalid) UTF-8
        bytes, is refused naming its path and the top-level field."""
        body = poisoned(FULL_BODIES[route], path, key)
        escaped = json.dumps(body).encode()
        raw_bytes = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        for raw in (escaped, raw_bytes):
            with pytest.raises(InvalidUnicode) as refused:
                decode_json_body(raw)
            assert refused.value.message.startswith(expected_start(path, key))
            top = str(path[0]) if path else f"{key}\\udc00"
            assert refused.value.param == top
            assert refused.value.reason == "invalid_unicode"

    @pytest.mark.parametrize(
        ("tail", "message"),
        [
            (b'"a\\ud800"}', "not valid Unicode: a lone surrogate \\ud800 at byte "),
            (b'"a\\udc00\\ud800"}', "not valid Unicode: a lone surrogate \\udc00 at byte "),
            (
                '"a\ud800"}'.encode("utf-8", "surrogatepass"),
                "a lone surrogate (as UTF-8 bytes) at byte ",
            ),
            (b'"a\xff"}', "the body is not valid UTF-8 (byte "),
            (b'"\\uZZZZ"}', "the body is not valid JSON: "),
        ],
    )
    def test_a_large_body_is_located_not_decoded_again(
        self, monkeypatch: pytest.MonkeyPatch, tail: bytes, message: str
    ) -> None:
        """A refused body over ``EXPLAIN_BYTES`` is scanned in C for where the bad string is
        (a byte offset), never decoded again or walked in Python."""

        def slow(*args: Any) -> None:
            raise AssertionError("a large refused body was decoded again")

        monkeypatch.setattr(json, "loads", slow)
        monkeypatch.setattr(json_body, "invalid_string_at", slow)
        head = b'{"input_ids": [' + b"7," * (json_body.EXPLAIN_BYTES // 2) + b'7], "s": '
        raw = head + b'"fine \\ud83d\\ude00 \\\\ud800", "text": ' + tail
        with pytest.raises(InvalidBody) as refused:
            decode_json_body(raw)
        assert message in refused.value.message
        if "byte " in message and "UTF-8" not in message:
            at = int(refused.value.message.split("at byte ")[1].split()[0])
            assert raw[at : at + 2] in (b"\\u", b"\xed")

    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            (b'{"text": "\xff"}', "the body is not valid UTF-8 (byte 10)"),
            (b'{"text": ', "the body is not valid JSON: Expecting value: line 1 column 10"),
            (b"NaN", "the body is not valid JSON: JSON is malformed"),
            (b"[1e400]", "the body is not valid JSON: Number out of range"),
            (b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "it nests too deeply"),
        ],
    )
    def test_what_is_not_json_says_why(self, raw: bytes, message: str) -> None:
        """Invalid UTF-8, malformed JSON, what only Python's decoder reads (NaN, a number
        out of range) and nesting past the interpreter's limit: a 400 saying which."""
        with pytest.raises(InvalidBody) as refused:
            decode_json_body(raw)
        assert message in refused.value.message
        assert refused.value.status == 400


class TestMediaType:
    """:func:`is_json_media_type`."""

    @pytest.mark.parametrize(
        "declared",
        [
            "application/json",
            "APPLICATION/JSON",
            "application/json; charset=utf-8",
            "application/json ;charset=UTF-8",
            "application/vnd.api+json",
            "application/merge-patch+json; q=1",
        ],
    )
    def test_json_types_are_json(self, declared: str) -> None:
        """``application/json`` and ``application/*+json``, any case and parameters."""
        assert is_json_media_type(declared)

    @pytest.mark.parametrize(
        "declared",
        [
            "",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/plain",
            "text/json",
            "application/json-seq",
            "application/+json",
            "application",
            "json",
        ],
    )
    def test_everything_else_is_not(self, declared: str) -> None:
        """The CORS "simple" types (form, multipart, text/plain) and lookalikes are not."""
        assert not is_json_media_type(declared)


def _worker(tokenizer: Tokenizer, run_dir: Path, **options: Any) -> FastAPI:
    settings = WorkerSettings(
        worker_id="w0", link=WorkerLinkSettings.in_run_dir(run_dir, "w0"), **options
    )
    return create_app(settings, tokenizer, NO_METRICS)


@pytest.fixture(scope="module")
def module_run_dir() -> Iterator[Path]:
    """A short run directory for the module's worker."""
    with tempfile.TemporaryDirectory(prefix="sb-unit-", dir="/tmp") as path:
        yield Path(path)


@pytest.fixture(scope="module")
def worker(default_tokenizer: Tokenizer, module_run_dir: Path) -> FastAPI:
    """A worker app (JSON content types only) whose router never answers."""
    return _worker(default_tokenizer, module_run_dir)


@pytest.fixture(scope="module")
def client(worker: FastAPI) -> Iterator[httpx.Client]:
    """A client of the served worker."""
    with served(worker) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
        yield client


def rejected(worker: FastAPI, reason: str) -> int:
    """How many refusals the worker counted under ``reason``."""
    return int(worker.state.link.counters.get("http_rejected", reason))


class TestSurrogatesServed:
    """Every endpoint refuses a lone surrogate anywhere, before validating or streaming."""

    @pytest.mark.parametrize(("route", "path", "key"), CASES)
    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streaming"])
    def test_refused_with_400_naming_it(
        self,
        worker: FastAPI,
        client: httpx.Client,
        route: str,
        path: JsonPath,
        key: str | None,
        stream: bool,
    ) -> None:
        """400 in the worker's JSON error shape, ``param`` the top-level field, counted
        as ``invalid_unicode``; a streaming request gets it too, never a 200 stream."""
        body = poisoned(FULL_BODIES[route], path, key)
        if stream:
            body = {**body, "stream": True}
        before = rejected(worker, "invalid_unicode")
        answer = client.post(route, content=json.dumps(body).encode(), headers=JSON)
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert error["message"].startswith(expected_start(path, key))
        assert error["type"] == "invalid_request_error" and error["code"] == 400
        assert rejected(worker, "invalid_unicode") == before + 1


#: Bodies a browser may send cross-origin without asking first, and other non-JSON.
NOT_JSON: list[tuple[str, dict[str, str]]] = [
    ("form", {"Content-Type": "application/x-www-form-urlencoded"}),
    ("multipart", {"Content-Type": "multipart/form-data; boundary=b"}),
    ("text", {"Content-Type": "text/plain;charset=UTF-8"}),
    ("none", {}),
]


class TestContentTypesServed:
    """Only bodies declared as JSON are read."""

    @pytest.mark.parametrize("route", list(FULL_BODIES))
    @pytest.mark.parametrize(("kind", "headers"), NOT_JSON, ids=[kind for kind, _ in NOT_JSON])
    def test_a_body_not_declared_json_is_415(
        self,
        worker: FastAPI,
        client: httpx.Client,
        route: str,
        kind: str,
        headers: dict[str, str],
    ) -> None:
        """415 naming the fix (send Content-Type: application/json), with Accept-Post,
        counted as ``unsupported_media_type``; the body is not read as JSON."""
        before = rejected(worker, "unsupported_media_type")
        content = json.dumps({"text": "hi", "model": MODEL, "prompt": "hi", "input": "hi"})
        answer = client.post(route, content=content, headers=headers)
        assert answer.status_code == 415, answer.text
        error = answer.json()["error"]
        assert "Content-Type: application/json" in error["message"]
        assert error["code"] == 415 and error["type"] == "invalid_request_error"
        assert answer.headers["accept-post"] == "application/json"
        assert rejected(worker, "unsupported_media_type") == before + 1

    def test_two_content_types_are_415(self, client: httpx.Client) -> None:
        """A request declaring two content types is not guessed at."""
        headers = [("Content-Type", "application/json"), ("Content-Type", "text/plain")]
        answer = client.post("/generate", content=b'{"text": "hi"}', headers=headers)
        assert answer.status_code == 415

    @pytest.mark.parametrize(
        "declared", ["application/json; charset=utf-8", "application/vnd.switchboard+json"]
    )
    def test_json_types_are_read(self, client: httpx.Client, declared: str) -> None:
        """A JSON type with parameters, or a ``+json`` one, is decoded and validated (here:
        a 400 naming a wrongly typed field)."""
        body = json.dumps({"text": "hi", "stream": "not a boolean"})
        answer = client.post("/generate", content=body, headers={"Content-Type": declared})
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == "stream"

    @pytest.mark.parametrize("path", ["/health", "/v1/models", "/get_model_info"])
    def test_get_routes_are_unaffected(self, client: httpx.Client, path: str) -> None:
        """GET routes take no body, so a content type does not matter to them."""
        answer = client.get(path, headers={"Content-Type": "text/plain"})
        assert answer.status_code in (200, 503)  # /health: 503 while not registered
        assert answer.status_code != 415

    @pytest.mark.parametrize(("kind", "headers"), NOT_JSON, ids=[kind for kind, _ in NOT_JSON])
    def test_accept_any_content_type_reads_them_as_json(
        self, default_tokenizer: Tokenizer, run_dir: Path, kind: str, headers: dict[str, str]
    ) -> None:
        """With ``accept_any_content_type`` a body of any declared type (or none) is read
        as JSON (here: a 400 naming a wrongly typed field); surrogates are still refused."""
        app = _worker(default_tokenizer, run_dir, accept_any_content_type=True)
        with served(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as lenient:
            body = json.dumps({"text": "hi", "stream": "not a boolean"})
            answer = lenient.post("/generate", content=body, headers=headers)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["param"] == "stream"
            bad = lenient.post("/generate", content=b'{"text": "\\ud800"}', headers=headers)
            assert bad.status_code == 400 and bad.json()["error"]["param"] == "text"
