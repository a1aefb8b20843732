"""Both routers' control sockets, run as real processes in a run dir: a request without
the stack key runs nothing (reads included) and is answered UNAUTHORIZED; with the key,
and through ``switchboard ctl --run-dir``, it works; every mutation and every refusal is
an audit line in the router's log and its ``--audit-log`` file. A router given no key
(no run dir) runs every request, and says so once at start."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from router_core.control import ControlClient, ControlError, ErrorCode
from router_core.endpoints import RouterEndpoints
from tests.integration.harness import Stack, wait_until
from tests.integration.harness.control import ask
from tests.integration.harness.stack import FAST_ROUTER_ARGS, router_socket_files

pytestmark = pytest.mark.integration


def _ctl(switchboard_bin: str, run_dir: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [switchboard_bin, "ctl", "--run-dir", str(run_dir), "--timeout-s", "5", *words],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class TestControlKey:
    """What a keyless, a wrongly keyed and a keyed client get from both routers."""

    def test_both_routers_refuse_requests_without_the_key(self, stack: Stack) -> None:
        """status without the key, or with another one, is UNAUTHORIZED naming the run
        dir's key file, on the tokenizer and the detokenizer router alike; the router
        counts each refusal and still answers a keyed client."""
        router = stack.start_router()
        detok = stack.start_detok_router(1)
        key_file = stack.run_dir / "stack.key"
        for endpoint in (router.endpoints.control, detok.endpoints.control):
            for key in (None, "0" * 64):
                client = ControlClient(endpoint, timeout_s=5.0, context=stack.context, key=key)
                with client, pytest.raises(ControlError) as refused:
                    ask(client, "status")
                assert refused.value.code is ErrorCode.UNAUTHORIZED, endpoint
                assert str(key_file) in refused.value.message
        for handle in (router, detok):
            rejected = handle.ctl("status")["counters"]["rejected"]
            assert rejected == {"control_unauthorized": 2}

    def test_ctl_with_the_run_dir_works_and_mutations_are_audited(
        self, stack: Stack, switchboard_bin: str, tmp_path: Path
    ) -> None:
        """``switchboard ctl --run-dir`` reaches both routers with the key; its pause and
        continue, and a keyless pause that was refused, are audit records in the
        ``--audit-log`` file and audit lines in the router's log."""
        audit_file = tmp_path / "router-audit.jsonl"
        router = stack.start_router("--audit-log", str(audit_file))
        stack.start_detok_router(1)
        status = _ctl(switchboard_bin, stack.run_dir, "status")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["role"] == "tokenizer_router"
        detok = _ctl(switchboard_bin, stack.run_dir, "--detok-router", "status")
        assert detok.returncode == 0, detok.stderr
        assert json.loads(detok.stdout)["role"] == "detokenizer_router"
        for words in (("pause", "mode=in_place", "timeout_s=2"), ("continue",)):
            done = _ctl(switchboard_bin, stack.run_dir, *words)
            assert done.returncode == 0, done.stderr
        seq = router.ctl("status")["last_op_seq"]
        eve = ControlClient(router.endpoints.control, context=stack.context, actor="eve")
        with eve, pytest.raises(ControlError):
            ask(eve, "pause")
        assert router.ctl("status")["last_op_seq"] == seq  # the refused pause never ran
        records = [
            {k: record[k] for k in ("who", "via", "at", "action", "result", "reason")}
            for record in _records(audit_file)
        ]
        assert records == [
            {
                "who": "ctl",
                "via": "control",
                "at": "tokenizer_router",
                "action": action,
                "result": "ok",
                "reason": None,
            }
            for action in ("pause", "continue")
        ] + [
            {
                "who": "eve",
                "via": "control",
                "at": "tokenizer_router",
                "action": "pause",
                "result": "refused",
                "reason": "unauthorized",
            }
        ]
        assert _records(audit_file)[0]["args"] == "mode=in_place timeout_s=2.0"
        assert audit_file.stat().st_mode & 0o777 == 0o600

        def logged() -> bool:
            return "audit who=eve via=control at=tokenizer_router action=pause" in (
                router.process.log_path.read_text()
            )

        wait_until(logged, 5.0, "the refusal's audit line in the router's log")

    def test_router_without_a_key_runs_every_request_and_warns(self, stack: Stack) -> None:
        """Given its endpoints and no run dir or key file, a router has no key: a keyless
        client is served, and its log says once that the control socket is open."""
        endpoints = RouterEndpoints.in_run_dir(stack.run_dir)
        flags = [
            f"--{field.replace('_', '-')}-endpoint={getattr(endpoints, field)}"
            for field in endpoints.__struct_fields__
        ]
        argv = [stack.switchboard, "router", *flags, *FAST_ROUTER_ARGS]
        argv += ["--parent-pid", str(os.getpid())]
        proc = stack.processes.spawn("keyless-router", argv, router_socket_files(endpoints))
        with ControlClient(endpoints.control, timeout_s=5.0, context=stack.context) as client:

            def answers() -> bool:
                proc.assert_running()
                try:
                    return bool(ask(client, "status", reply_timeout_s=0.25))
                except ControlError:
                    return False

            wait_until(answers, 15.0, "the keyless router to answer")
        log = proc.log_path.read_text()
        assert log.count(f"control socket {endpoints.control} runs every command without") == 1
        assert not (stack.run_dir / "stack.key").exists()
