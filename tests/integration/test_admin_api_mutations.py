"""The admin API's mutations against a real stack: the pause barrier's 200 and 504
answers and SGLang's names for it, drain and undrain with their 404 and 409, freeze GC,
and the audit log they write.

One stack serves the whole module (tests leave it serving and unpaused); a second,
smaller one with no token configured checks the generated console URL.
"""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

import httpx
import pytest

from tests.integration.harness import wait_until
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.test_admin_api import error_code, ops, stack, wait_worker, worker

pytestmark = pytest.mark.integration

__all__ = ["ops", "stack"]


class TestPause:
    """The barrier from HTTP: 200 with every acknowledgement, 504 naming stragglers."""

    def test_pause_in_place_then_continue(self, ops: httpx.Client) -> None:
        """Every worker and the engine acknowledge; status shows the pause, then its end."""
        before = time.time()
        reply = ops.post("/api/pause", json={"mode": "in_place", "timeout_s": 5})
        assert reply.status_code == 200, reply.text
        operation = reply.json()
        assert operation["action"] == "pause" and operation["mode"] == "in_place"
        assert operation["complete"] and operation["stragglers"] == []
        assert set(operation["acked"]) == {"engine", "w0", "w1"}
        status = ops.get("/api/status").json()
        assert status["paused"] is True and status["pause_mode"] == "in_place"
        assert status["pause_state_since"] >= before - 1
        assert status["recent_operations"][-1]["op_id"] == operation["op_id"]
        wait_worker(ops, "w0", state="paused")

        reply = ops.post("/api/continue", json={"timeout_s": 5})
        assert reply.status_code == 200, reply.text
        resumed = reply.json()
        assert resumed["action"] == "continue" and resumed["complete"]
        assert set(resumed["acked"]) == {"engine", "w0", "w1"}
        status = ops.get("/api/status").json()
        assert (
            status["paused"] is False
            and status["recent_operations"][-1]["seq"] > (operation["seq"])
        )

    def test_sglang_aliases(self, ops: httpx.Client) -> None:
        """``/pause_generation`` (default abort; no body needed) and ``/continue_generation``."""
        paused = ops.post("/pause_generation")
        assert paused.status_code == 200, paused.text
        assert paused.json()["action"] == "pause" and paused.json()["mode"] == "abort"
        retract = ops.post("/pause_generation", json={"mode": "retract"})
        assert retract.status_code == 200 and retract.json()["mode"] == "retract"
        resumed = ops.post("/continue_generation", content=b"")
        assert resumed.status_code == 200 and resumed.json()["action"] == "continue"
        assert ops.get("/api/status").json()["paused"] is False

    @pytest.mark.parametrize(
        "body",
        [
            {"mode": "sideways"},
            {"timeout_s": 0},
            {"timeout_s": 601},
            {"mode": "abort", "surprise": 1},
            [1, 2],
        ],
    )
    def test_bad_bodies_are_400(self, ops: httpx.Client, body: Any) -> None:
        """A mode that does not exist, a timeout out of (0, 600] or junk is 400."""
        reply = ops.post("/api/pause", json=body)
        assert reply.status_code == 400 and error_code(reply) == "bad_request"

    def test_broken_json_is_400(self, ops: httpx.Client) -> None:
        """A body that is not JSON is 400 ``bad_request``."""
        headers = {"Content-Type": "application/json"}
        reply = ops.post("/api/continue", content=b"{not json", headers=headers)
        assert reply.status_code == 400 and error_code(reply) == "bad_request"

    def test_stopped_worker_is_a_named_straggler(self, ops: httpx.Client) -> None:
        """A worker that cannot acknowledge (SIGSTOPped) makes a pause 504, naming it."""
        pid = worker(ops, "w1")["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            reply = ops.post("/api/pause", json={"mode": "abort", "timeout_s": 1})
        finally:
            os.kill(pid, signal.SIGCONT)
        assert reply.status_code == 504, reply.text
        body = reply.json()
        assert body["complete"] is False and body["stragglers"] == ["w1"]
        assert set(body["acked"]) == {"engine", "w0"}
        assert body["error"]["code"] == "timeout" and "w1" in body["error"]["message"]
        recent = ops.get("/api/status").json()["recent_operations"][-1]
        assert recent["op_id"] == body["op_id"] and recent["stragglers"] == ["w1"]

        reply = ops.post("/api/continue", json={"timeout_s": 10})
        assert reply.status_code == 200, reply.text
        assert set(reply.json()["acked"]) == {"engine", "w0", "w1"}
        wait_worker(ops, "w1", state="serving")


class TestDrain:
    """Draining one worker from HTTP, and the 404/409 answers."""

    def test_drain_until_safe_then_undrain(self, ops: httpx.Client) -> None:
        """A drained idle worker reaches ``drained`` with ``safe_to_delete``; undrain serves."""
        reply = ops.post("/api/workers/w1/drain")
        assert reply.status_code == 200, reply.text
        assert reply.json()["id"] == "w1" and reply.json()["state"] in ("draining", "drained")
        wait_worker(ops, "w1", state="drained", safe_to_delete=True, inflight=0)

        again = ops.post("/api/workers/w1/drain")  # idempotent: it stays drained
        assert again.status_code == 200 and again.json()["state"] == "drained"

        reply = ops.post("/api/workers/w1/undrain")
        assert reply.status_code == 200, reply.text
        wait_worker(ops, "w1", state="serving", safe_to_delete=False)

    def test_undrain_a_serving_worker_is_409(self, ops: httpx.Client) -> None:
        """Undrain applies only to a draining or drained worker."""
        reply = ops.post("/api/workers/w0/undrain")
        assert reply.status_code == 409 and error_code(reply) == "conflict"
        assert "w0" in reply.json()["error"]["message"]

    @pytest.mark.parametrize("action", ["drain", "undrain"])
    def test_unknown_worker_is_404(self, ops: httpx.Client, action: str) -> None:
        """Draining or undraining an id the router does not know is 404."""
        reply = ops.post(f"/api/workers/w-nobody/{action}")
        assert reply.status_code == 404 and error_code(reply) == "not_found"

    def test_freeze_gc(self, ops: httpx.Client) -> None:
        """freeze_gc reports the router frozen and the engine asked."""
        reply = ops.post("/api/freeze_gc")
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"frozen": ["tokenizer_router"], "forwarded_to": ["engine"]}


class TestAuditLog:
    """Mutations are audited by token name; token values never reach a log."""

    def test_mutations_are_audited_by_name(self, stack: AdminStack, ops: httpx.Client) -> None:
        """Each mutation writes one ``switchboard.audit`` line naming ``ops`` and the result."""
        ops.post("/api/freeze_gc").raise_for_status()
        assert ops.post("/api/workers/w-ghost/drain").status_code == 404

        def audited() -> list[str]:
            # The admin app's lines; the routers audit their control commands too (via=).
            lines = [
                line
                for line in stack.stderr().splitlines()
                if "switchboard.audit" in line and " via=" not in line
            ]
            wanted = ("action=freeze_gc target=all result=ok", "action=drain target=w-ghost")
            return lines if all(any(w in line for line in lines) for w in wanted) else []

        lines = wait_until(audited, 5.0, "the audit lines")
        for line in lines:
            assert re.search(
                r"audit who=\S+ action=\S+ target=\S+ result=(ok|timeout|refused|error) "
                r"status=\S+ reason=\S+ detail=",
                line,
            )
        assert any(
            "who=ops action=drain target=w-ghost result=refused status=404 reason=not_found "
            in line
            for line in lines
        )
        assert any(
            "who=ops action=freeze_gc target=all result=ok status=200 " in line for line in lines
        )

    def test_router_audit_names_the_operator(self, stack: AdminStack, ops: httpx.Client) -> None:
        """The router's own audit line for a mutation the admin app sent names the
        operator behind it (``who=admin:ops``), not just the admin app."""
        ops.post("/api/freeze_gc").raise_for_status()

        def router_lines() -> list[str]:
            return [
                line
                for line in stack.stderr().splitlines()
                if " via=control " in line and "action=freeze_gc" in line
            ]

        lines = wait_until(router_lines, 5.0, "the router's audit line")
        assert any("who=admin:ops via=control " in line for line in lines), lines

    def test_tokens_are_never_logged(self, stack: AdminStack) -> None:
        """Neither token appears in any process's log or on stdout; the console URL does."""
        log = stack.stderr()
        assert stack.operator_token not in log and stack.viewer_token not in log
        assert stack.operator_token not in stack.serving_line
        assert f"console {stack.admin_url}/;" in stack.serving_line


def test_generated_token_is_in_the_console_url(
    stack: AdminStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With no token configured, the serving line's console URL carries a generated
    operator token that the admin app accepts, and no log line holds it."""
    # The module's stack keeps serving meanwhile: two stacks on free ports at once.
    arguments = ("--detokenizers", "1")
    with admin_stack(
        tmp_path_factory, workers=1, extra_args=arguments, configure_tokens=False
    ) as bare:
        match = re.search(r"; console (http://\S+)/#token=(\S+); run dir", bare.serving_line)
        assert match is not None, bare.serving_line
        assert match.group(1) == bare.admin_url and match.group(2) == bare.operator_token
        with bare.client() as client:
            reply = client.post("/api/freeze_gc")
            assert reply.status_code == 200, reply.text
        # The app writes its audit line as the reply goes out, so the line may land a
        # moment after the client has the reply (the router's own line can come first).
        wait_until(
            lambda: "who=console action=freeze_gc" in bare.stderr(),
            5.0,
            "the admin app's audit line for freeze_gc",
        )
        assert bare.operator_token not in bare.stderr()
