"""Secrets never appear in logs, metrics or process listings (issue 24, point 2).

Three real stacks, each with secrets made fresh for this run (so a match is never an
accident): a one-host ``switchboard up`` with configured operator and viewer tokens and
an SGLang ``api_key`` (from a 0600 config file); one whose operator token it generates
itself (shown once, on the serving line, on stdout); and a control host with a worker
host on loopback, joined over CURVE with keys from ``switchboard keys generate`` and a
stack key from ``switchboard keys stack``. Each serves requests, takes a pause and a
continue with the operator token (and, through a worker, with the api_key), refusals
with the viewer's and an unknown token (itself a fresh secret: a presented credential
must not be logged either), and is stopped. Then no secret (the stack key file, the run
dirs' ``stack.key``, every CURVE secret key, every admin token) may be found, even 16
characters of it, in: any command line of the supervisors and their descendants, their
stdout (but the serving line that shows the generated token by design), their stderr and
audit files, any ``GET`` the admin app's and the workers' OpenAPI schemas list
(``/metrics`` and every ``/api/*``, read with the viewer token), or any file in the run
and key directories that group or others may read. :class:`TestTheChecksCanFail` shows
each check finds a planted secret.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.curve_keys import free_gateway_listen, gateway_keys
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import wait_until
from tests.integration.harness.scrape import generate
from tests.integration.harness.secret_scan import (
    WINDOW,
    Secrets,
    command_lines,
    http_reads,
    world_readable_files,
)
from tests.integration.harness.worker_host import WorkerHost, worker_host

pytestmark = pytest.mark.integration

#: The one stdout line allowed to show a generated token: the console URL's fragment.
TOKEN_LINE = re.compile(r"^switchboard: serving .*#token=")


@dataclass
class Exposure:
    """A stack's secrets and every text a less trusted reader could see, by kind."""

    secrets: Secrets = field(default_factory=Secrets)
    #: kind (``cmdline``, ``log``, ``http``, ``file``) -> place -> text.
    seen: dict[str, dict[str, str]] = field(default_factory=dict)

    def record(self, kind: str, texts: dict[str, str]) -> None:
        """Add ``texts`` (place -> text) to those of ``kind``."""
        self.seen.setdefault(kind, {}).update(texts)


def _use(stack: AdminStack, exposure: Exposure, base_url: str) -> None:
    """Requests through ``base_url``; pause and continue as the operator; a mutation
    refused for the viewer (403) and for an unknown token (401)."""
    for _ in range(4):
        generate(base_url)
    with stack.client() as operator:
        paused = operator.post("/api/pause", json={"mode": "in_place", "timeout_s": 5})
        assert paused.status_code == 200, paused.text
        resumed = operator.post("/api/continue", json={"timeout_s": 5})
        assert resumed.status_code == 200, resumed.text
    if stack.viewer_token:
        with stack.client(stack.viewer_token) as viewer:
            assert viewer.post("/api/continue", json={}).status_code == 403
    unknown = secrets.token_hex(24)
    exposure.secrets.add("an unknown token presented", unknown)
    with stack.client(unknown) as stranger:
        assert stranger.post("/api/continue", json={}).status_code == 401


def _observe(stack: AdminStack, exposure: Exposure, worker_urls: list[str]) -> None:
    """While the stack runs: its run dir's key, command lines, HTTP answers, files."""
    exposure.secrets.add("run dir stack.key", (stack.run_dir / "stack.key").read_text())
    supervisor = psutil.Process(stack.supervisor.pid)
    exposure.record("cmdline", command_lines([supervisor, *stack.descendants()]))
    with stack.client() as operator:
        worker_ids = [worker["id"] for worker in operator.get("/api/workers").json()["workers"]]
    reader = stack.viewer_token or stack.operator_token
    admin = http_reads(stack.admin_url, reader, worker_ids[0])
    assert any(worker_ids[0] in text for text in admin.values()), "no worker in the reads"
    exposure.record("http", admin)
    for url in worker_urls:
        exposure.record("http", http_reads(url, None, "switchboard-sim"))
    assert any("switchboard_" in text for text in exposure.seen["http"].values())
    exposure.record("file", world_readable_files(stack.run_dir))


def _logs(stack: AdminStack, audit: Path | None) -> dict[str, str]:
    """After the stop: stdout but its token line (checked to be there once at most),
    stderr and the audit file."""
    lines = stack.stdout().splitlines()
    shown = [line for line in lines if TOKEN_LINE.match(line)]
    assert len(shown) <= 1, shown
    logs = {
        "supervisor stdout (but the serving line)": "\n".join(
            line for line in lines if line not in shown
        ),
        "stderr": stack.stderr(),
    }
    if audit is not None:
        logs["audit file"] = audit.read_text()
    return logs


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Exposure:
    """One host, configured operator and viewer tokens, an api_key, an audit file."""
    exposure = Exposure()
    private = tmp_path_factory.mktemp("configured")
    api_key = secrets.token_hex(24)
    config = private / "stack.toml"
    config.write_text(f'api_key = "{api_key}"\n')
    config.chmod(0o600)
    audit = private / "audit.jsonl"
    extra = ("--config", str(config), "--admin-audit-log", str(audit))
    with admin_stack(tmp_path_factory, workers=2, extra_args=extra) as stack:
        exposure.secrets.add("operator token", stack.operator_token)
        exposure.secrets.add("viewer token", stack.viewer_token)
        exposure.secrets.add("api_key", api_key)
        _use(stack, exposure, stack.base_url)
        # SGLang's tooling pauses through a worker with the api_key, which the worker
        # forwards to the admin app: one more hop that could log it.
        sglang = {"Authorization": f"Bearer {api_key}"}
        with httpx.Client(base_url=stack.base_url, headers=sglang, trust_env=False) as client:
            for path in ("/pause_generation", "/continue_generation"):
                answer = client.post(path, json={}, timeout=30.0)
                assert answer.status_code == 200, answer.text
        _observe(stack, exposure, [stack.base_url])
    exposure.record("log", _logs(stack, audit))
    assert "api-key" in exposure.seen["log"]["audit file"]
    return exposure


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Exposure:
    """One host whose operator token ``switchboard up`` generated."""
    exposure = Exposure()
    with admin_stack(tmp_path_factory, workers=1, configure_tokens=False) as stack:
        assert TOKEN_LINE.match(stack.serving_line), stack.serving_line
        exposure.secrets.add("generated operator token", stack.operator_token)
        _use(stack, exposure, stack.base_url)
        _observe(stack, exposure, [stack.base_url])
    exposure.record("log", _logs(stack, None))
    return exposure


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Exposure:
    """A control host and a two-worker worker host on loopback, over CURVE."""
    exposure = Exposure()
    keys = gateway_keys(tmp_path_factory.mktemp("keys"))
    stack_key = keys.directory / "stack.key"
    subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "keys", "stack", str(stack_key)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    exposure.secrets.add("stack key file", stack_key.read_text())
    for name in ("control", "host-a", "intruder"):
        exposure.secrets.add_curve(f"CURVE secret of {name}", keys.secret(name))
    gateway = free_gateway_listen()
    control_args = (
        *("--role", "control"),
        *keys.stack_args(gateway),
        *("--stack-key-file", str(stack_key)),
    )
    workers_args = (
        *("--workers", "2", "--port", str(free_port()), "--step-time-s", "0.005"),
        *("--control", gateway.removeprefix("tcp://")),
        *("--curve-key-pair", str(keys.secret("host-a"))),
        *("--gateway-public-key", str(keys.public("control"))),
        *("--stack-key-file", str(stack_key)),
    )
    log = tmp_path_factory.mktemp("worker-host") / "up.log"
    with admin_stack(tmp_path_factory, workers=1, extra_args=control_args, serving=0) as control:
        exposure.secrets.add("operator token", control.operator_token)
        exposure.secrets.add("viewer token", control.viewer_token)
        with worker_host(log, workers_args) as workers:
            _serving_two(control)
            _use(control, exposure, workers.base_url)
            _observe(control, exposure, [workers.base_url])
            _observe_worker_host(workers, exposure)
        exposure.record("file", world_readable_files(keys.directory))
    exposure.record("log", {**_logs(control, None), "worker host output": log.read_text()})
    return exposure


def _serving_two(control: AdminStack) -> None:
    """Wait until the control host lists the worker host's two workers serving."""

    def serving() -> list[str]:
        with control.client() as client:
            listed = client.get("/api/workers").json()["workers"]
        return [worker["id"] for worker in listed if worker["state"] == "serving"]

    wait_until(lambda: len(serving()) == 2, 60.0, lambda: f"two workers serving: {serving()}")


def _observe_worker_host(workers: WorkerHost, exposure: Exposure) -> None:
    """The worker host's command lines, and its own run dir (named by its workers'
    ``--run-dir``): the key there and the files others may read."""
    supervisor = psutil.Process(workers.supervisor.pid)
    found = command_lines([supervisor, *workers.descendants()])
    assert len(found) >= 3, found
    exposure.record("cmdline", found)
    named = {m.group(1) for line in found.values() if (m := re.search(r"--run-dir (\S+)", line))}
    assert len(named) == 1, named
    run_dir = Path(named.pop())
    exposure.secrets.add("worker host's run dir stack.key", (run_dir / "stack.key").read_text())
    exposure.record("file", world_readable_files(run_dir))


STACKS = ("configured", "generated", "two_hosts")


@pytest.mark.parametrize("name", STACKS)
class TestNoSecretExposed:
    """Each stack, each kind of place a less trusted reader sees."""

    def test_not_in_any_command_line(self, name: str, request: pytest.FixtureRequest) -> None:
        """No process of the stack shows a secret in its command line."""
        exposure: Exposure = request.getfixturevalue(name)
        assert len(exposure.seen["cmdline"]) >= 5, exposure.seen["cmdline"]
        exposure.secrets.assert_absent(exposure.seen["cmdline"])

    def test_not_in_any_log(self, name: str, request: pytest.FixtureRequest) -> None:
        """Stdout (but the designed token line), stderr, audit files: no secret."""
        exposure: Exposure = request.getfixturevalue(name)
        assert "switchboard.supervisor" in exposure.seen["log"]["stderr"]
        exposure.secrets.assert_absent(exposure.seen["log"])

    def test_not_in_metrics_or_api_reads(self, name: str, request: pytest.FixtureRequest) -> None:
        """Every GET the admin app and the workers list (``/metrics``, ``/api/*``)."""
        exposure: Exposure = request.getfixturevalue(name)
        assert any("/metrics" in where for where in exposure.seen["http"])
        exposure.secrets.assert_absent(exposure.seen["http"])

    def test_not_in_readable_files(self, name: str, request: pytest.FixtureRequest) -> None:
        """Files in the run (and key) directories that group or others may read."""
        exposure: Exposure = request.getfixturevalue(name)
        exposure.secrets.assert_absent(exposure.seen.get("file", {}))


class TestTheChecksCanFail:
    """Each check, given a planted secret, fails."""

    def test_a_run_of_a_secret_is_found_and_never_shown(self) -> None:
        """A WINDOW-character slice of a secret is found, one character less is not, and
        the failure names the place and the secret but does not print it."""
        found = Secrets()
        value = secrets.token_hex(32)
        found.add("key", value)
        assert found.found_in(f"x {value[10 : 10 + WINDOW]} y") == ["key"]
        assert found.found_in(value[10 : 10 + WINDOW - 1]) == []
        with pytest.raises(AssertionError) as failed:
            found.assert_absent({"a log": f"token={value}"})
        assert "a log" in str(failed.value) and value[:WINDOW] not in str(failed.value)

    def test_a_curve_secret_is_found_as_hex(self, tmp_path: Path) -> None:
        """A CURVE secret printed as hex bytes is found as well as its z85 spelling."""
        keys = gateway_keys(tmp_path / "keys")
        found = Secrets()
        found.add_curve("host-a", keys.secret("host-a"))
        z85, hexed = found.forms["host-a"]
        assert found.found_in(hexed) == ["host-a"]
        assert found.found_in(z85) == ["host-a"]
        assert found.found_in(keys.public("host-a").read_text()) == []

    def test_a_command_line_with_a_secret_is_caught(self) -> None:
        """A process with a secret in its argv is seen by :func:`command_lines`."""
        value = secrets.token_hex(24)
        found = Secrets()
        found.add("token", value)
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", value])
        try:
            with pytest.raises(AssertionError):
                found.assert_absent(command_lines([psutil.Process(sleeper.pid)]))
        finally:
            sleeper.kill()
            sleeper.wait(10)

    def test_only_readable_files_are_read(self, tmp_path: Path) -> None:
        """A group/world-readable file holding a secret is caught; a 0600 one is not read."""
        value = secrets.token_hex(24)
        found = Secrets()
        found.add("token", value)
        (tmp_path / "open").write_text(value)
        (tmp_path / "open").chmod(0o644)
        (tmp_path / "private").write_text(value)
        (tmp_path / "private").chmod(0o600)
        readable = world_readable_files(tmp_path)
        assert [where.split()[1] for where in readable] == [str(tmp_path / "open")]
        with pytest.raises(AssertionError):
            found.assert_absent(readable)
