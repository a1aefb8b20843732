"""The operator commands end to end against a canned admin API: output, stderr, exit status.

A real HTTP server (``http.server`` in a thread, on a free loopback port: ``canned_api.py``,
the ``api`` fixture of the package conftest) answers each ``(method, path)`` with canned
JSON and records what it was sent, so these tests cover the whole command path, socket
included, without the admin app.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from switchboard.admin_cli import run
from tests.unit.switchboard.admin_cli.api_bodies import LOAD, operation, status, worker
from tests.unit.switchboard.admin_cli.canned_api import (
    TOKEN,
    CannedApi,
    free_port,
    invoke,
    parse,
)

REPO = Path(__file__).resolve().parents[4]


class TestReads:
    """status, workers and load print tables, or the API's JSON with --json."""

    def test_workers_table(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """One aligned row per worker, with the operator token sent."""
        api.answer("GET", "/api/workers", 200, {"workers": [worker(), worker("w1")]})
        result = invoke(capsys, api, "workers")
        assert result.status == 0
        assert result.err == ""
        lines = result.out.splitlines()
        assert lines[0].startswith("ID  STATE")
        assert [line.split()[0] for line in lines[1:]] == ["w0", "w1"]
        assert api.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"

    def test_workers_json(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints exactly what the API answered."""
        body = {"workers": [worker()]}
        api.answer("GET", "/api/workers", 200, body)
        result = invoke(capsys, api, "workers", "--json")
        assert (result.status, json.loads(result.out)) == (0, body)

    def test_status_table(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """Pause state, engine, workers and the operations table."""
        api.answer(
            "GET",
            "/api/status",
            200,
            status(paused=True, pause_mode="retract", recent_operations=[operation()]),
        )
        result = invoke(capsys, api, "status")
        assert result.status == 0
        assert result.out.startswith("paused    YES, since")
        assert "mode      retract" in result.out
        assert "recent operations (newest last)" in result.out

    def test_status_json(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints the status as the API gave it."""
        api.answer("GET", "/api/status", 200, status())
        result = invoke(capsys, api, "status", "--json")
        assert json.loads(result.out) == status()

    def test_load(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """The load snapshot as key-value lines."""
        api.answer("GET", "/api/load", 200, {"load": LOAD})
        result = invoke(capsys, api, "load")
        assert (result.status, result.out.splitlines()[0]) == (0, "running      3 of 256")

    def test_load_none_yet(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """No report yet is not a failure."""
        api.answer("GET", "/api/load", 200, {"load": None})
        result = invoke(capsys, api, "load")
        assert (result.status, result.out) == (0, "the engine has not reported its load yet\n")

    def test_unexpected_shape(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """An answer of the wrong shape fails in one line, no traceback."""
        api.answer("GET", "/api/workers", 200, {"items": []})
        result = invoke(capsys, api, "workers")
        assert result.status == 1
        assert result.out == ""
        assert result.err.startswith("switchboard workers: unexpected answer from the admin app")
        assert len(result.err.splitlines()) == 1


class TestBarrier:
    """pause and continue: 200 complete exits 0; 504 prints the stragglers and exits 1."""

    def test_pause_in_place(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """The mode and barrier timeout are sent; the outcome is printed."""
        api.answer("POST", "/api/pause", 200, operation())
        result = invoke(capsys, api, "pause", "--mode", "in_place", "--timeout", "2.5")
        assert result.status == 0
        assert result.err == ""
        assert api.requests[0].body == {"mode": "in_place", "timeout_s": 2.5}
        assert result.out.splitlines()[0] == "pause (in_place): complete in 0.012s (seq 7)"

    def test_pause_defaults(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """Without flags: mode abort, barrier timeout 5 s."""
        api.answer("POST", "/api/pause", 200, operation(mode="abort"))
        assert invoke(capsys, api, "pause").status == 0
        assert api.requests[0].body == {"mode": "abort", "timeout_s": 5.0}

    def test_continue(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """continue sends only the timeout."""
        api.answer("POST", "/api/continue", 200, operation(action="continue", mode=None))
        result = invoke(capsys, api, "continue", "--timeout", "1")
        assert result.status == 0
        assert api.requests[0].body == {"timeout_s": 1.0}
        assert result.out.startswith("continue: complete in")

    def test_timeout_504(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """A 504 prints the outcome, names the stragglers on stderr, and exits 1."""
        timed_out = {
            **operation(complete=False, acked=["engine", "w0"], stragglers=["w1", "w2"]),
            "error": {"code": "timeout", "message": "2 stragglers"},
        }
        api.answer("POST", "/api/pause", 504, timed_out)
        result = invoke(capsys, api, "pause", "--timeout", "1")
        assert result.status == 1
        assert "stragglers  w1, w2" in result.out
        assert result.err == ("switchboard pause: timed out after 0.012s; stragglers: w1, w2\n")

    def test_timeout_504_json(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """With --json the 504 body is printed as JSON, still exit 1."""
        timed_out = operation(complete=False, stragglers=["w1"])
        api.answer("POST", "/api/continue", 504, timed_out)
        result = invoke(capsys, api, "continue", "--json")
        assert (result.status, json.loads(result.out)) == (1, timed_out)
        assert "stragglers: w1" in result.err

    def test_504_without_operation(
        self, api: CannedApi, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A gateway's 504 that is not an operation is an ordinary failure."""
        api.answer("POST", "/api/pause", 504, {"error": {"code": "timeout", "message": "slow"}})
        result = invoke(capsys, api, "pause")
        assert (result.status, result.out) == (1, "")
        assert result.err == "switchboard pause: slow (timeout, HTTP 504)\n"

    def test_no_answer_in_time(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """An app that never answers fails the operation (exit 1) after the HTTP wait."""
        api.stall.add("/api/workers")
        result = invoke(capsys, api, "workers", "--timeout", "0.2")
        assert result.status == 1
        assert result.err == (
            f"switchboard workers: no answer from the admin app at {api.url} within 0.2 s\n"
        )


class TestDrain:
    """drain and undrain: the worker's new row; 404 and 409 exit 1 with the API's words."""

    def test_drain(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """The worker id is in the path; the answer is a one-row table."""
        api.answer("POST", "/api/workers/w0/drain", 200, worker(state="draining"))
        result = invoke(capsys, api, "drain", "w0")
        assert result.status == 0
        assert result.out.splitlines()[1].split()[:2] == ["w0", "draining"]

    def test_undrain(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """undrain posts to the undrain path."""
        api.answer("POST", "/api/workers/w0/undrain", 200, worker())
        assert invoke(capsys, api, "undrain", "w0").status == 0
        assert api.requests[0].path == "/api/workers/w0/undrain"

    def test_impossible_id_is_not_sent(
        self, api: CannedApi, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An id with a slash or space, which no worker can have, is a usage error and no
        request reaches the API (quoting a path segment: test_catalogue)."""
        result = invoke(capsys, api, "drain", "a/b c")
        assert result.status == 2
        assert api.requests == []

    def test_unknown_worker(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """404: the API's message on one line, exit 1."""
        api.answer(
            "POST",
            "/api/workers/nope/drain",
            404,
            {"error": {"code": "not_found", "message": "no worker 'nope'"}},
        )
        result = invoke(capsys, api, "drain", "nope")
        assert (result.status, result.out) == (1, "")
        assert result.err == "switchboard drain: no worker 'nope' (not_found, HTTP 404)\n"

    def test_conflict(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """409: the API's message, exit 1."""
        api.answer(
            "POST",
            "/api/workers/w0/undrain",
            409,
            {"error": {"code": "conflict", "message": "w0 is serving, not draining"}},
        )
        result = invoke(capsys, api, "undrain", "w0")
        assert result.status == 1
        assert result.err == (
            "switchboard undrain: w0 is serving, not draining (conflict, HTTP 409)\n"
        )


class TestConnection:
    """Auth failures and an unreachable app exit 3; the token is never printed."""

    @pytest.mark.parametrize(("status", "code"), [(401, "unauthorized"), (403, "forbidden")])
    def test_auth_exit_3(
        self, api: CannedApi, capsys: pytest.CaptureFixture[str], status: int, code: str
    ) -> None:
        """401 and 403 exit 3 with the API's message."""
        api.answer("POST", "/api/pause", status, {"error": {"code": code, "message": "denied"}})
        result = invoke(capsys, api, "pause")
        assert result.status == 3
        assert result.err == f"switchboard pause: denied ({code}, HTTP {status})\n"
        assert TOKEN not in result.out + result.err

    def test_unreachable_exit_3(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Nobody listening: exit 3, one line naming the URL."""
        url = f"http://127.0.0.1:{free_port()}"
        result = invoke(capsys, None, "status", "--url", url, "--token", TOKEN)
        assert result.status == 3
        assert result.err.startswith(f"switchboard status: cannot reach the admin app at {url}")
        assert len(result.err.splitlines()) == 1
        assert TOKEN not in result.err

    def test_environment(
        self, api: CannedApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """SWITCHBOARD_ADMIN_URL and SWITCHBOARD_ADMIN_TOKEN stand in for the flags."""
        api.answer("GET", "/api/load", 200, {"load": None})
        monkeypatch.setenv("SWITCHBOARD_ADMIN_URL", api.url)
        monkeypatch.setenv("SWITCHBOARD_ADMIN_TOKEN", "from-env")
        assert invoke(capsys, None, "load").status == 0
        assert api.requests[0].headers["Authorization"] == "Bearer from-env"

    def test_flags_beat_environment(
        self, api: CannedApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """--url and --token win over the environment."""
        api.answer("GET", "/api/load", 200, {"load": None})
        monkeypatch.setenv("SWITCHBOARD_ADMIN_URL", f"http://127.0.0.1:{free_port()}")
        monkeypatch.setenv("SWITCHBOARD_ADMIN_TOKEN", "from-env")
        assert invoke(capsys, api, "load").status == 0
        assert api.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"

    def test_bad_url_exit_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A URL that is not http(s) is a usage error."""
        result = invoke(capsys, None, "status", "--url", "localhost:8001")
        assert result.status == 2
        assert result.err.startswith("switchboard status: error: argument --url: 'localhost:8001'")

    def test_bad_token_exit_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A token with a newline is refused before sending, without echoing it."""
        result = invoke(capsys, None, "status", "--token", "abc\nSECRETPART")
        assert result.status == 2
        assert "SECRETPART" not in result.err

    def test_no_token_401_hint(self, api: CannedApi, capsys: pytest.CaptureFixture[str]) -> None:
        """Without any token, a 401 says how to give one."""
        api.answer("GET", "/api/status", 401, {"error": {"code": "unauthorized", "message": "no"}})
        code = run(parse("status", "--url", api.url))
        assert code == 3
        assert "give --token or set SWITCHBOARD_ADMIN_TOKEN" in capsys.readouterr().err
        assert "Authorization" not in api.requests[0].headers


def _run_probe(probe: str, *words: str) -> subprocess.CompletedProcess[str]:
    """``probe`` run by a fresh interpreter with ``words`` as its arguments and the token
    in the environment."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "SWITCHBOARD_ADMIN_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-c", probe, *words],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


class TestProcess:
    """As a process: python -m switchboard.cli, quick to start."""

    def test_subprocess(self, api: CannedApi) -> None:
        """The console entry reaches the API and loads neither fastapi nor pydantic."""
        api.answer("GET", "/api/load", 200, {"load": LOAD})
        probe = (
            "import sys\n"
            "from switchboard.admin_cli import run, add_parsers\n"
            "import argparse\n"
            "parser = argparse.ArgumentParser()\n"
            "add_parsers(parser.add_subparsers(dest='command'))\n"
            "code = run(parser.parse_args(sys.argv[1:]))\n"
            "heavy = sorted(m for m in ('fastapi', 'pydantic', 'starlette', 'uvicorn', 'zmq')"
            " if m in sys.modules)\n"
            "print('heavy:', heavy)\n"
            "sys.exit(code)\n"
        )
        done = _run_probe(probe, "load", "--url", api.url)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == "running      3 of 256"
        assert done.stdout.splitlines()[-1] == "heavy: []"

    def test_cli_main_stays_light(self, api: CannedApi) -> None:
        """python -m switchboard.cli status imports neither fastapi nor pydantic."""
        api.answer("GET", "/api/load", 200, {"load": None})
        probe = (
            "import sys\n"
            "from switchboard.cli import main\n"
            "code = main(sys.argv[1:])\n"
            "print('heavy:', sorted(m for m in ('fastapi', 'pydantic') if m in sys.modules))\n"
            "sys.exit(code)\n"
        )
        done = _run_probe(probe, "load", "--url", api.url)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "heavy: []"


class TestWatch:
    """``status --watch`` and ``workers --watch`` show the answer again until Ctrl-C."""

    def test_watch_shows_again_until_ctrl_c(
        self, api: CannedApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each interval asks again and redraws (cursor home, clear); Ctrl-C ends it, 0."""
        api.answer("GET", "/api/workers", 200, {"workers": []})
        naps: list[float] = []

        def nap(seconds: float) -> None:
            naps.append(seconds)
            if len(naps) == 3:
                raise KeyboardInterrupt

        monkeypatch.setattr("switchboard.admin_cli.commands.time.sleep", nap)
        result = invoke(capsys, api, "workers", "--watch", "0.5")
        assert result.status == 0
        assert naps == [0.5, 0.5, 0.5]
        assert result.out.count("\x1b[H\x1b[J") == 2  # two redraws before the third nap

    def test_only_reads_offer_watch(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A mutation cannot be watched: --watch is a usage error there."""
        result = invoke(capsys, None, "pause", "--watch", "--url=http://127.0.0.1:9")
        assert result.status == 2 and "--watch" in result.err


class TestPipes:
    """Output into a pipe whose reader left (``| head``): no traceback, exit 0."""

    def test_a_closed_pipe_is_quiet(self) -> None:
        script = (
            "import sys, httpx\n"
            "from switchboard.admin_cli.commands import execute\n"
            "from switchboard.cli import build_parser\n"
            "body = {'workers': [], 'filler': 'x' * 200000}\n"
            "transport = httpx.MockTransport(lambda r: httpx.Response(200, json=body))\n"
            "args = build_parser('workers').parse_args(\n"
            "    ['workers', '--json', '--url', 'http://admin.test', '--token', 't'])\n"
            "sys.exit(execute(args, transport=transport))\n"
        )
        done = subprocess.run(
            f'{sys.executable} -c "$SCRIPT" | head -c 5',
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "SCRIPT": script},
            check=False,
        )
        assert done.stdout == '{\n  "'
        assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
