"""The control socket of a real router: typed errors, the router unharmed, the ctl CLI."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import zmq

from router_core.control import ControlError, ControlRequest, ErrorCode
from router_core.control.protocol import decode_reply, encode
from tests.integration.harness import SocketFactory, Stack

pytestmark = pytest.mark.integration


class TestControlErrors:
    def test_errors_are_typed_and_the_router_keeps_running(
        self, stack: Stack, sockets: SocketFactory, switchboard_bin: str
    ) -> None:
        """Unknown command, bad arguments, unknown worker and a state conflict each get
        their error code; the router keeps serving, and ``switchboard ctl`` reports an
        error in one line with exit status 1."""
        router = stack.start_router()
        stack.start_worker("w0")
        pid = router.ctl("status")["pid"]
        cases: list[tuple[str, dict[str, Any], ErrorCode]] = [
            ("no_such_command", {}, ErrorCode.UNKNOWN_COMMAND),
            ("pause", {"mode": "sideways"}, ErrorCode.BAD_ARGUMENTS),
            ("get_worker", {}, ErrorCode.BAD_ARGUMENTS),
            ("status", {"verbose": True}, ErrorCode.BAD_ARGUMENTS),
            ("get_worker", {"worker_id": "nobody"}, ErrorCode.NOT_FOUND),
            ("drain", {"worker_id": "nobody"}, ErrorCode.NOT_FOUND),
            ("undrain", {"worker_id": "w0"}, ErrorCode.CONFLICT),
        ]
        for command, args, code in cases:
            with pytest.raises(ControlError) as caught:
                router.raw_ctl(command, **args)
            assert caught.value.code is code, (command, args, caught.value)
        # ControlClient.call keeps timeout_s for itself, so these go over a raw DEALER.
        dealer = sockets.connected(zmq.DEALER, router.endpoints.control)
        raw: list[tuple[str, dict[str, Any]]] = [
            ("pause", {"timeout_s": -1}),
            ("continue", {"timeout_s": "soon"}),
        ]
        for request_id, (name, arguments) in enumerate(raw, start=1):
            request = ControlRequest(id=request_id, command=name, args=arguments, key=stack.key)
            dealer.send(encode(request))
            reply = decode_reply(dealer.recv())
            assert reply.id == request_id and not reply.ok and reply.error is not None
            assert reply.error.code == ErrorCode.BAD_ARGUMENTS, reply
        status = router.ctl("status")
        assert status["pid"] == pid
        assert status["workers"] == {"serving": 1}
        assert status["counters"]["rejected"] == {"unknown_command": 1, "control_arguments": 5}

        ctl = [switchboard_bin, "ctl", "--run-dir", str(stack.run_dir), "--timeout-s", "5"]
        good = subprocess.run(
            [*ctl, "get_worker", "worker_id=w0"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert good.returncode == 0, good.stderr
        assert json.loads(good.stdout)["id"] == "w0"
        bad = subprocess.run(
            [*ctl, "get_worker", "worker_id=nobody"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert bad.returncode == 1
        assert bad.stderr.count("\n") == 1 and "NOT_FOUND" in bad.stderr, bad.stderr
        assert router.ctl("status")["pid"] == pid

    def test_pause_timeout_argument_reaches_the_router(self, stack: Stack) -> None:
        """``pause`` called through the control client with ``timeout_s`` passes it to the
        router as the barrier timeout (an invalid one is answered BAD_ARGUMENTS)."""
        router = stack.start_router()
        stack.start_engine(wait_live=router)
        with pytest.raises(ControlError) as caught:
            router.raw_ctl("pause", timeout_s=-1)
        assert caught.value.code is ErrorCode.BAD_ARGUMENTS
