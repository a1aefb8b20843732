"""The request body limit (``httpkit.body_limit``), over a small FastAPI app served by
uvicorn with httptools on a loopback port, declared and chunked bodies sent by httpx."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from httpkit.body_limit import BodySizeLimit
from tests.unit.httpkit.served import WAIT_S, served

LIMIT = 64 * 1024


class EchoApp:
    """A FastAPI app behind the limit: ``POST /json`` parses a JSON body (as both users
    do), ``POST /raw`` answers the size and digest of the bytes it was handed, ``GET
    /plain`` takes no body. It records the requests that reached it and each refusal."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.reached: list[str] = []
        self.refused: list[int] = []
        self.started = False
        app = FastAPI(lifespan=self._lifespan)

        @app.post("/json")
        async def parse_json(body: dict[str, Any]) -> dict[str, int]:
            self.reached.append("/json")
            return {"keys": len(body)}

        @app.post("/raw")
        async def raw(request: Request) -> dict[str, Any]:
            self.reached.append("/raw")
            data = await request.body()
            return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}

        @app.get("/plain")
        async def plain() -> dict[str, bool]:
            self.reached.append("/plain")
            return {"ok": True}

        app.add_middleware(BodySizeLimit, max_bytes=limit, refusal=self._refuse)
        self.app = app

    async def _lifespan(self, app: FastAPI) -> Any:
        self.started = True
        yield

    def _refuse(self, max_bytes: int) -> Response:
        self.refused.append(max_bytes)
        return JSONResponse({"error": f"over {max_bytes}"}, status_code=413)


def chunks(data: bytes, size: int = 4096) -> Iterator[bytes]:
    """``data`` in pieces, so httpx sends it chunked (no Content-Length)."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.fixture
def echo() -> EchoApp:
    """A fresh app behind a 64 KiB limit."""
    return EchoApp()


@pytest.fixture
def client(echo: EchoApp) -> Iterator[httpx.Client]:
    """A client of the served app, keeping its connection between requests."""
    with served(echo.app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
        yield client


class TestDeclared:
    """A body whose Content-Length is over the limit is refused unread."""

    def test_over_the_limit_is_refused_before_the_app(
        self, echo: EchoApp, client: httpx.Client
    ) -> None:
        """A declared body one byte over the limit gets the refusal; the app never runs."""
        answer = client.post("/json", content=b"x" * (LIMIT + 1))
        assert (answer.status_code, answer.json()) == (413, {"error": f"over {LIMIT}"})
        assert echo.reached == [] and echo.refused == [LIMIT]

    def test_within_the_limit_reaches_the_app_whole(
        self, echo: EchoApp, client: httpx.Client
    ) -> None:
        """A declared body exactly at the limit reaches the app byte for byte."""
        data = bytes(range(256)) * (LIMIT // 256)
        answer = client.post("/raw", content=data)
        assert answer.status_code == 200
        assert answer.json() == {"size": LIMIT, "sha256": hashlib.sha256(data).hexdigest()}
        assert echo.refused == []


class TestChunked:
    """A body of undeclared length is read up to the limit before the app runs."""

    def test_over_the_limit_is_413_not_a_parse_error(
        self, echo: EchoApp, client: httpx.Client
    ) -> None:
        """A chunked JSON body growing past the limit gets the refusal (not FastAPI's
        400 "There was an error parsing the body"); the app never runs."""
        body = b'{"text": "' + b"a" * LIMIT + b'"}'
        answer = client.post(
            "/json", content=chunks(body), headers={"Content-Type": "application/json"}
        )
        assert "content-length" not in answer.request.headers
        assert (answer.status_code, answer.json()) == (413, {"error": f"over {LIMIT}"})
        assert echo.reached == [] and echo.refused == [LIMIT]

    def test_far_over_the_limit_is_refused_and_the_connection_serves_on(
        self, echo: EchoApp, client: httpx.Client
    ) -> None:
        """A 17 MiB chunked body is refused; the next request on the client is served."""
        answer = client.post("/raw", content=chunks(b"z" * (17 << 20), 1 << 20))
        assert answer.status_code == 413
        assert client.get("/plain").json() == {"ok": True}
        assert echo.reached == ["/plain"] and echo.refused == [LIMIT]

    def test_at_the_limit_reaches_the_app_whole(self, echo: EchoApp, client: httpx.Client) -> None:
        """Exactly ``max_bytes`` in many chunks reach the app in order, byte for byte."""
        data = hashlib.sha256(b"seed").digest() * (LIMIT // 32)
        answer = client.post("/raw", content=chunks(data, 1000))
        assert answer.status_code == 200
        assert answer.json() == {"size": LIMIT, "sha256": hashlib.sha256(data).hexdigest()}
        assert echo.refused == []

    def test_small_json_is_parsed(self, echo: EchoApp, client: httpx.Client) -> None:
        """A chunked JSON body within the limit is parsed by the app as usual."""
        answer = client.post(
            "/json",
            content=chunks(b'{"a": 1, "b": 2}', 3),
            headers={"Content-Type": "application/json"},
        )
        assert (answer.status_code, answer.json()) == (200, {"keys": 2})


class TestPassThrough:
    """Requests without a body, and other ASGI traffic, are untouched."""

    def test_lifespan_and_a_bodyless_get(self, echo: EchoApp, client: httpx.Client) -> None:
        """The app's lifespan ran through the middleware, and a GET is served."""
        assert echo.started
        assert client.get("/plain").json() == {"ok": True}
        assert echo.refused == []

    def test_every_refusal_is_made_once(self, echo: EchoApp, client: httpx.Client) -> None:
        """Each refused request calls the refusal once, declared or chunked."""
        client.post("/raw", content=b"x" * (LIMIT + 1))
        client.post("/raw", content=chunks(b"x" * (LIMIT + 1)))
        client.post("/raw", content=b"x")
        assert echo.refused == [LIMIT, LIMIT]
        assert echo.reached == ["/raw"]


class TestSettings:
    """The limit itself."""

    def test_a_negative_limit_is_refused(self) -> None:
        """max_bytes below 0 is a ValueError at construction."""
        with pytest.raises(ValueError, match="max_bytes"):
            BodySizeLimit(FastAPI(), max_bytes=-1, refusal=lambda limit: Response(status_code=413))

    def test_a_zero_limit_takes_only_empty_bodies(self) -> None:
        """With max_bytes 0 an empty POST passes and one byte is refused."""
        echo = EchoApp(limit=0)
        with served(echo.app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
            assert client.post("/raw", content=b"").json()["size"] == 0
            assert client.post("/raw", content=chunks(b"x")).status_code == 413
        assert echo.refused == [0]
