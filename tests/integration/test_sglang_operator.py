"""SGLang's operator endpoints on the serving port, against a real ``switchboard up``.

``/pause_generation``, ``/continue_generation`` and ``/abort_request`` on the workers'
port are the admin app's commands: the same barrier (the stack really pauses, a request
waits), the same roles (401 without a token, naming the admin app; 403 for a viewer's),
the same audit (``GET /api/audit`` names the principal, ``api-key`` for ``--api-key``).
An abort ends a running stream with finish reason abort; ``/get_load`` and ``/version``
answer without a token; ``/health_generate`` answers at once, in JSON, while paused. The
admin app silent is a bounded 503. One stack for the module, left unpaused by each test.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from switchboard import __version__
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.polling import wait_until
from tests.integration.harness.sse import StreamThread

pytestmark = pytest.mark.integration

#: The engine steps every 20 ms, so a long stream is still running when it is aborted.
STEP_TIME_S = 0.02
BARRIER_S = 5.0
API_KEY = secrets.token_hex(16)
#: A /health_generate that does not try a generation answers well within this.
PROMPT_ANSWER_S = 2.0
#: How long a request sent while paused is watched for an answer it must not get: the
#: window is the assertion (unpaused, four tokens take 0.1 s).
PAUSED_WINDOW_S = 1.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """``switchboard up`` with 2 workers and ``--api-key``, continued before it stops."""
    arguments = ("--api-key", API_KEY, "--detokenizers", "1")
    with admin_stack(
        tmp_path_factory, workers=2, step_time=STEP_TIME_S, extra_args=arguments
    ) as running:
        try:
            yield running
        finally:
            with running.client() as client:
                client.post("/api/continue", json={"timeout_s": BARRIER_S})


def serving(stack: AdminStack, token: str | None = None) -> httpx.Client:
    """A client of the workers' port sending ``token`` (none: no Authorization)."""
    return httpx.Client(
        base_url=stack.base_url, headers=stack.headers(token), timeout=30.0, trust_env=False
    )


def paused(stack: AdminStack) -> tuple[bool, str | None]:
    with stack.client(stack.viewer_token) as client:
        status = client.get("/api/status").json()
    return status["paused"], status["pause_mode"]


def audit_records(stack: AdminStack, limit: int = 20) -> list[dict[str, Any]]:
    """The admin app's latest audit records, newest first."""
    with stack.client(stack.viewer_token) as client:
        records: list[dict[str, Any]] = client.get(f"/api/audit?limit={limit}").json()["records"]
    return records


def newest(stack: AdminStack, action: str) -> dict[str, Any]:
    return next(record for record in audit_records(stack) if record["action"] == action)


def long_stream(stack: AdminStack) -> tuple[str, StreamThread]:
    """A stream of 2000 tokens (40 s), once its first event arrived."""
    rid = f"abort-me-{secrets.token_hex(4)}"
    body = {"text": "hello", "rid": rid, "sampling_params": {"max_new_tokens": 2000}}
    stream = StreamThread(stack.base_url, body).start()
    wait_until(stream.started, 30.0, "the stream's first event")
    assert stream.failure is None and stream.seen.events, (stream.failure, stream.seen.error)
    return rid, stream


def last_event(stream: StreamThread, timeout: float) -> dict[str, Any]:
    """The last event of ``stream``, which ended with [DONE] within ``timeout``."""
    seen = stream.finish(timeout)
    assert seen.done and seen.events, (seen.status, seen.events[-1:], seen.error)
    return seen.events[-1]


class TestPauseAndContinue:
    """Pause and continue on the serving port are the admin app's barrier."""

    def test_pause_holds_requests_until_continue(self, stack: AdminStack) -> None:
        """/pause_generation pauses every worker and the engine (the admin app says so); a
        request waits; /continue_generation (no body) resumes, and the request finishes."""
        with serving(stack, stack.operator_token) as client:
            answer = client.post("/pause_generation", json={"mode": "in_place"})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["status"], body["message"]) == ("ok", "Generation paused successfully.")
        assert body["operation"]["complete"] is True
        assert set(body["operation"]["acked"]) == {"engine", "w0", "w1"}
        assert paused(stack) == (True, "in_place")
        answered: list[int] = []

        def generate() -> None:
            with serving(stack) as late_client:
                body = {"text": "sent while paused", "sampling_params": {"max_new_tokens": 4}}
                answered.append(late_client.post("/generate", json=body).status_code)

        late = threading.Thread(target=generate, daemon=True)
        late.start()
        late.join(PAUSED_WINDOW_S)
        assert late.is_alive(), "a request sent while paused was answered"
        with serving(stack, stack.operator_token) as client:
            resumed = client.post("/continue_generation")
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["operation"]["action"] == "continue"
        assert paused(stack) == (False, None)
        late.join(30.0)
        assert not late.is_alive() and answered == [200]
        pause, resume = newest(stack, "pause"), newest(stack, "continue")
        for record in (pause, resume):
            assert (record["who"], record["result"], record["status"]) == ("ops", "ok", 200)
        assert "mode=in_place" in pause["detail"]

    def test_the_api_key_is_an_operator_named_api_key(self, stack: AdminStack) -> None:
        """--api-key's key pauses and continues; the audit names it api-key."""
        with serving(stack, API_KEY) as client:
            assert client.post("/pause_generation", json={"mode": "retract"}).status_code == 200
            assert newest(stack, "pause")["who"] == "api-key"
            assert client.post("/continue_generation", json={}).status_code == 200
        assert newest(stack, "continue")["who"] == "api-key"
        assert paused(stack) == (False, None)


class TestRefusals:
    """Only an operator's token pauses; each refusal says why and where to look."""

    def test_no_token_is_a_401_naming_the_admin_app(self, stack: AdminStack) -> None:
        """401 in the worker's shape, naming the admin URL and where a token is; the admin
        app audited the attempt; nothing paused."""
        with serving(stack) as client:
            answer = client.post("/pause_generation", json={"mode": "abort"})
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"
        error = answer.json()["error"]
        assert (error["type"], error["code"], error["cause"]) == (
            "authentication_error",
            401,
            "unauthorized",
        )
        assert stack.admin_url in error["message"] and "#token=" in error["message"]
        refused = newest(stack, "pause")
        assert (refused["who"], refused["status"], refused["result"]) == (None, 401, "refused")
        assert paused(stack) == (False, None)

    def test_an_unknown_token_is_a_401(self, stack: AdminStack) -> None:
        """The admin app's reason is kept, beside its URL."""
        with serving(stack, "not-a-token-anyone-has") as client:
            answer = client.post("/continue_generation")
        assert answer.status_code == 401
        message = answer.json()["error"]["message"]
        assert stack.admin_url in message and "unknown token" in message

    def test_a_viewers_token_is_a_403(self, stack: AdminStack) -> None:
        """A viewer may read, not pause: 403, audited under the viewer's name."""
        with serving(stack, stack.viewer_token) as client:
            answer = client.post("/pause_generation", json={"mode": "in_place"})
        assert answer.status_code == 403
        error = answer.json()["error"]
        assert error["type"] == "permission_error" and "viewer" in error["message"]
        assert error["cause"] == "forbidden"
        assert (newest(stack, "pause")["who"], paused(stack)) == ("viewer", (False, None))

    def test_a_bad_mode_is_a_400(self, stack: AdminStack) -> None:
        """The admin app's validation message, in the worker's shape."""
        with serving(stack, stack.operator_token) as client:
            answer = client.post("/pause_generation", json={"mode": "sideways"})
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert "mode" in error["message"] and error["cause"] == "invalid_request"


class TestAbort:
    """/abort_request ends a request in the engine, whichever worker holds it."""

    def test_a_running_stream_ends_with_abort(self, stack: AdminStack) -> None:
        """The stream's last event has finish reason abort; the audit names rid and who."""
        rid, stream = long_stream(stack)
        with serving(stack, stack.operator_token) as client:
            answer = client.post("/abort_request", json={"rid": rid})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["status"], body["rid"], body["abort_all"]) == ("ok", rid, False)
        assert sorted(body["sent_for"]) == ["w0", "w1"]
        last = last_event(stream, 10.0)
        reason = last["meta_info"]["finish_reason"]
        assert reason == {"type": "abort", "message": "aborted by an operator"}
        assert last["meta_info"]["completion_tokens"] < 2000
        record = newest(stack, "abort")
        assert (record["who"], record["status"]) == ("ops", 200)
        assert f"rid={rid}" in record["detail"]

    def test_abort_all_ends_every_stream(self, stack: AdminStack) -> None:
        """Two streams (on either worker) both end with abort."""
        streams = [long_stream(stack)[1] for _ in range(2)]
        with serving(stack, API_KEY) as client:
            answer = client.post("/abort_request", json={"abort_all": True})
        assert answer.status_code == 200, answer.text
        for stream in streams:
            assert last_event(stream, 10.0)["meta_info"]["finish_reason"]["type"] == "abort"

    def test_neither_rid_nor_abort_all_is_a_400(self, stack: AdminStack) -> None:
        """An abort that names nothing is refused, saying what to send."""
        with serving(stack, stack.operator_token) as client:
            answer = client.post("/abort_request", json={})
        assert answer.status_code == 400
        assert "rid" in answer.json()["error"]["message"]


class TestReads:
    """/get_load and /version need no token."""

    def test_get_load_is_sglangs_shape(self, stack: AdminStack) -> None:
        """One entry, rank 0, SGLang's counts, our snapshot beside them."""
        with serving(stack) as client:
            answer = client.get("/get_load")
        assert answer.status_code == 200
        (entry,) = answer.json()
        assert {"dp_rank", "num_reqs", "num_waiting_reqs", "num_tokens"} <= set(entry)
        assert entry["dp_rank"] == 0 and entry["num_reqs"] >= entry["num_waiting_reqs"] >= 0
        ours = entry["switchboard"]
        assert ours["max_running"] > 0 and ours["age_s"] >= 0

    def test_version(self, stack: AdminStack) -> None:
        """``{"version": ...}``, the package's."""
        with serving(stack) as client:
            assert client.get("/version").json() == {"version": __version__}


class TestHealthGenerate:
    """/health_generate answers JSON, and at once while paused."""

    def test_serving_is_ok(self, stack: AdminStack) -> None:
        """200 ``ok`` with the worker and the generation's latency."""
        with serving(stack) as client:
            answer = client.get("/health_generate")
        assert answer.status_code == 200
        body = answer.json()
        assert body["status"] == "ok" and body["worker_id"] in ("w0", "w1")
        assert body["latency_s"] > 0

    @pytest.mark.parametrize("mode", ["abort", "retract", "in_place"])
    def test_paused_answers_at_once(self, stack: AdminStack, mode: str) -> None:
        """Each worker (a fresh connection each time) answers 200 ``paused`` with the mode,
        well within the 20 s a generation would wait."""
        with serving(stack, stack.operator_token) as client:
            assert client.post("/pause_generation", json={"mode": mode}).status_code == 200
            try:
                seen = set()
                for _ in range(6):
                    started = time.monotonic()
                    answer = client.get("/health_generate", headers={"Connection": "close"})
                    assert time.monotonic() - started < PROMPT_ANSWER_S
                    assert answer.status_code == 200
                    body = answer.json()
                    assert (body["status"], body["pause_mode"]) == ("paused", mode)
                    seen.add(body["worker_id"])
                assert seen <= {"w0", "w1"}
            finally:
                assert client.post("/continue_generation").status_code == 200


class TestAdminAppSilent:
    """An admin app that stops answering is a 503 within a bound."""

    def test_a_stopped_admin_app_is_a_bounded_503(self, stack: AdminStack) -> None:
        """With the admin app stopped (SIGSTOP), a continue is a 503 naming it, within its
        timeout_s plus the worker's 5 s margin."""
        (admin,) = stack.role_processes("admin")
        os.kill(admin.pid, signal.SIGSTOP)
        try:
            with serving(stack, stack.operator_token) as client:
                started = time.monotonic()
                answer = client.post("/continue_generation", json={"timeout_s": 0.5})
                took = time.monotonic() - started
        finally:
            os.kill(admin.pid, signal.SIGCONT)
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        error = answer.json()["error"]
        assert error["cause"] == "admin_unavailable"
        assert error["message"].startswith(
            f"the admin app at {stack.admin_url} did not answer within"
        )
        assert 5.0 <= took < 10.0
