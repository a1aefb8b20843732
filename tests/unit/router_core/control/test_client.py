"""Tests for both control clients, the blocking one and the asyncio one, against a
threaded server."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from router_core.control import (
    AsyncControlClient,
    ControlClient,
    ControlError,
    ControlReply,
    ControlTimeout,
    ErrorCode,
)
from router_core.control.protocol import ErrorBody, decode_request, encode, ok
from tests.unit.router_core.control.command_table import WAIT_S, ThreadServer, run_async


class TestControlClient:
    """The blocking client against a threaded server."""

    def test_success(self, client: ControlClient) -> None:
        """call() returns the handler's result."""
        assert client._call("add", a=2, b=3) == 5
        assert client._call("nothing") is None

    def test_unknown_command(self, client: ControlClient) -> None:
        """An unknown command raises UNKNOWN_COMMAND naming the known ones."""
        with pytest.raises(ControlError) as info:
            client._call("frobnicate")
        assert info.value.code is ErrorCode.UNKNOWN_COMMAND
        assert "add" in info.value.message

    @pytest.mark.parametrize(
        "args", [{"a": "x", "b": 1}, {"a": 1}, {"a": 1, "b": 2, "c": 3}], ids=str
    )
    def test_bad_arguments(
        self, client: ControlClient, served: ThreadServer, args: dict[str, Any]
    ) -> None:
        """Arguments that fail msgspec validation raise BAD_ARGUMENTS."""
        with pytest.raises(ControlError) as info:
            client._call("add", **args)
        assert info.value.code is ErrorCode.BAD_ARGUMENTS
        assert info.value.message.startswith("add: ")
        assert served.counters.get("rejected", "control_arguments") == 1

    def test_handler_control_error_keeps_its_code(self, client: ControlClient) -> None:
        """A ControlError raised by a handler reaches the client with its code and message."""
        with pytest.raises(ControlError) as info:
            client._call("missing")
        assert info.value.code is ErrorCode.NOT_FOUND
        assert info.value.message == "no such thing"

    def test_handler_bug_is_internal_and_server_keeps_serving(
        self, client: ControlClient, served: ThreadServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A handler raising RuntimeError gives INTERNAL, is logged, and the server goes on."""
        with caplog.at_level(logging.ERROR, logger="router_core.control.server"):
            with pytest.raises(ControlError) as info:
                client._call("crash")
            assert client._call("add", a=1, b=1) == 2
        assert info.value.code is ErrorCode.INTERNAL
        assert served.counters.get("control_errors", "crash") == 1
        assert any(record.exc_info for record in caplog.records)

    def test_timeout_and_late_reply_not_handed_on(self, client: ControlClient) -> None:
        """A timed-out call raises ControlTimeout; its late reply is not handed to the next call."""
        with pytest.raises(ControlTimeout) as info:
            client._call("hold", value=111, reply_timeout_s=0.2)
        assert info.value.code is ErrorCode.TIMEOUT
        # release answers the held request (the late reply) before its own reply.
        assert client._call("release", value=222) == 222
        assert client._call("add", a=1, b=2) == 3

    def test_reconnects_after_close(self, client: ControlClient) -> None:
        """A closed client reconnects on its next call."""
        assert client._call("add", a=1, b=1) == 2
        client.close()
        assert client._call("add", a=2, b=2) == 4


class TestAsyncControlClient:
    """The asyncio client: concurrent calls share one socket, replies matched by id."""

    def test_success_and_errors(self, served: ThreadServer) -> None:
        """Results come back; error replies raise ControlError with their code."""

        async def scenario() -> None:
            actx = zmq.asyncio.Context()
            try:
                async with AsyncControlClient(served.endpoint, context=actx) as client:
                    assert await client._call("add", a=20, b=22) == 42
                    with pytest.raises(ControlError) as info:
                        await client._call("missing")
                    assert info.value.code is ErrorCode.NOT_FOUND
                    with pytest.raises(ControlError) as info:
                        await client._call("add", a="x", b=1)
                    assert info.value.code is ErrorCode.BAD_ARGUMENTS
            finally:
                actx.destroy(linger=0)

        run_async(scenario())

    def test_fifty_concurrent_calls_matched_by_id(self, served: ThreadServer) -> None:
        """50 concurrent calls, answered in reverse order, each get their own result."""
        count = 50

        async def scenario() -> list[int]:
            actx = zmq.asyncio.Context()
            try:
                async with AsyncControlClient(
                    served.endpoint, context=actx, timeout_s=WAIT_S * 2
                ) as client:
                    return list(
                        await asyncio.gather(
                            *(client._call("hold", value=i, count=count) for i in range(count))
                        )
                    )
            finally:
                actx.destroy(linger=0)

        assert run_async(scenario()) == list(range(count))

    def test_timeout_then_late_reply_dropped(self, served: ThreadServer) -> None:
        """A timed-out call raises ControlTimeout and its late reply reaches nobody else."""

        async def scenario() -> None:
            actx = zmq.asyncio.Context()
            try:
                async with AsyncControlClient(served.endpoint, context=actx) as client:
                    with pytest.raises(ControlTimeout):
                        await client._call("hold", value=1, reply_timeout_s=0.2)
                    assert await client._call("release", value=2) == 2
            finally:
                actx.destroy(linger=0)

        run_async(scenario())

    def test_reader_skips_garbage_and_maps_unknown_codes(self, run_dir: Path) -> None:
        """Undecodable frames and unknown ids are skipped; an unknown error code is INTERNAL."""
        endpoint = f"ipc://{run_dir}/raw"

        async def scenario() -> None:
            actx = zmq.asyncio.Context()
            try:
                router = actx.socket(zmq.ROUTER)
                router.setsockopt(zmq.LINGER, 0)
                router.bind(endpoint)
                async with AsyncControlClient(endpoint, context=actx) as client:
                    call = asyncio.ensure_future(client._call("anything"))
                    identity, frame = await asyncio.wait_for(router.recv_multipart(), WAIT_S)
                    request_id = decode_request(frame).id
                    odd = ControlReply(
                        id=request_id, ok=False, error=ErrorBody(code=99, name="NEW", message="m")
                    )
                    await router.send_multipart([identity, b"\xc1garbage"])
                    await router.send_multipart([identity, encode(ok(request_id + 100, "x"))])
                    await router.send_multipart([identity, encode(odd)])
                    with pytest.raises(ControlError) as info:
                        await call
                    assert info.value.code is ErrorCode.INTERNAL
                    assert info.value.message == "m"
            finally:
                actx.destroy(linger=0)

        run_async(scenario())
