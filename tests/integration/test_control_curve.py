"""A tokenizer router's control socket over ``tcp://`` requires CURVE: without keys the
router refuses to start; with them, only clients whose public key is in the authorised
file get in (``switchboard ctl --curve-key-pair``), an unlisted key is refused and
counted, a key added to the file gets in without a restart, and the stack key is still
checked beneath CURVE. Real router process, real ``switchboard ctl`` processes.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import REPO_ROOT, wait_until

pytestmark = pytest.mark.integration


def switchboard(*arguments: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli", *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        check=False,
    )


@dataclass
class CurveRouter:
    """A router whose control socket is CURVE on loopback tcp, and the keys around it."""

    keys: Path
    run_dir: Path
    endpoint: str
    process: subprocess.Popen[bytes]

    def ctl(
        self, client: str | None, *command: str, key_file: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``switchboard ctl`` as ``client`` (a key name, or None for no CURVE keys)."""
        curve = (
            ()
            if client is None
            else (
                *("--curve-key-pair", str(self.keys / f"{client}.secret")),
                *("--server-public-key", str(self.keys / "router.public")),
            )
        )
        key = ("--key-file", key_file) if key_file else ("--run-dir", str(self.run_dir))
        return switchboard(
            "ctl", *key, "--endpoint", self.endpoint, "--timeout-s", "2", *curve, *command
        )


@pytest.fixture(scope="module")
def curve_router(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CurveRouter]:
    keys = tmp_path_factory.mktemp("control-keys")
    keys.chmod(0o700)
    for name in ("router", "client", "intruder"):
        made = switchboard("keys", "generate", "--dir", str(keys), name)
        assert made.returncode == 0, made.stderr
    (keys / "authorised").write_text((keys / "client.public").read_text())
    run_dir = tmp_path_factory.mktemp("control-run")
    run_dir.chmod(0o700)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    log = run_dir.parent / "router.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "switchboard.cli", "router", "--run-dir", str(run_dir)),
                *("--control-endpoint", endpoint),
                *("--control-key-pair", str(keys / "router.secret")),
                *("--control-authorised-keys", str(keys / "authorised")),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
        )
    router = CurveRouter(keys, run_dir, endpoint, process)
    try:
        wait_until(
            lambda: router.ctl("client", "status").returncode == 0,
            30.0,
            lambda: f"the router's control socket:\n{log.read_text()[-2000:]}",
        )
        yield router
    finally:
        process.terminate()
        assert process.wait(15) == 0, log.read_text()[-2000:]


def test_a_tcp_control_socket_without_curve_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    refused = switchboard("router", "--run-dir", str(tmp_path), "--control-endpoint", endpoint)
    assert refused.returncode == 2
    assert "is tcp://: it needs CURVE (--control-key-pair and --control-authorised-keys)" in (
        refused.stderr
    )


class TestCurveControl:
    def test_an_authorised_client_is_answered(self, curve_router: CurveRouter) -> None:
        done = curve_router.ctl("client", "status")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["counters"]["curve"]["accepted"] >= 1

    def test_an_unlisted_key_is_refused_and_counted(self, curve_router: CurveRouter) -> None:
        before = json.loads(curve_router.ctl("client", "status").stdout)["counters"]
        refused = curve_router.ctl("intruder", "status")
        assert refused.returncode == 1 and "TIMEOUT" in refused.stderr, refused
        after = json.loads(curve_router.ctl("client", "status").stdout)["counters"]
        was = before.get("refused", {}).get("unknown_key", 0)
        assert after["refused"]["unknown_key"] > was

    def test_a_client_without_keys_is_told_what_to_give(self, curve_router: CurveRouter) -> None:
        done = curve_router.ctl(None, "status")
        assert done.returncode == 2
        assert "requires CURVE: give a client key pair and the router's public key" in done.stderr

    def test_the_stack_key_is_still_checked_beneath(
        self, curve_router: CurveRouter, tmp_path: Path
    ) -> None:
        wrong = tmp_path / "wrong.key"
        wrong.write_text("0" * 64 + "\n")
        wrong.chmod(0o600)
        done = curve_router.ctl("client", "status", key_file=str(wrong))
        assert done.returncode == 1 and "UNAUTHORIZED" in done.stderr, done

    def test_a_key_added_to_the_file_gets_in_without_a_restart(
        self, curve_router: CurveRouter
    ) -> None:
        authorised = curve_router.keys / "authorised"
        authorised.write_text(
            authorised.read_text() + (curve_router.keys / "intruder.public").read_text()
        )
        wait_until(
            lambda: curve_router.ctl("intruder", "status").returncode == 0,
            10.0,
            "the added key let in",
        )


def test_the_detokenizer_router_holds_its_tcp_control_socket_to_curve(
    curve_router: CurveRouter, tmp_path: Path
) -> None:
    """The same rule and the same keys for the detokenizer router: refused without CURVE,
    answering an authorised client with it."""
    tmp_path.chmod(0o700)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    base = ("detok-router", "--run-dir", str(tmp_path), "--control-endpoint", endpoint)
    refused = switchboard(*base)
    assert refused.returncode == 2 and "it needs CURVE" in refused.stderr, refused
    keys = curve_router.keys
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "switchboard.cli", *base),
            *("--control-key-pair", str(keys / "router.secret")),
            *("--control-authorised-keys", str(keys / "authorised")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO_ROOT,
    )
    try:
        curve = (
            *("--curve-key-pair", str(keys / "client.secret")),
            *("--server-public-key", str(keys / "router.public")),
        )
        ask = ("ctl", "--run-dir", str(tmp_path), "--detok-router", "--endpoint", endpoint)
        wait_until(
            lambda: switchboard(*ask, "--timeout-s", "2", *curve, "status").returncode == 0,
            30.0,
            "the detokenizer router's CURVE control socket",
        )
    finally:
        process.terminate()
        assert process.wait(15) == 0


def test_the_admin_app_reaches_a_curve_control_socket(
    curve_router: CurveRouter, tmp_path: Path
) -> None:
    """``switchboard admin`` refuses a tcp:// control endpoint without CURVE files, and
    with them reads the router (its status through the API)."""
    keys, port = curve_router.keys, free_port()
    base = (
        *("admin", "--control-endpoint", curve_router.endpoint),
        *("--key-file", str(curve_router.run_dir / "stack.key"), "--port", str(port)),
    )
    refused = switchboard(*base)
    assert refused.returncode == 2 and "CONTROL_CURVE_KEY_PAIR" in refused.stderr, refused
    token = secrets.token_hex(16)
    env = {**os.environ, "SWITCHBOARD_ADMIN_VIEWER_TOKENS": f"test:{token}"}
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "switchboard.cli", *base),
            *("--control-curve-key-pair", str(keys / "client.secret")),
            *("--control-server-public-key", str(keys / "router.public")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO_ROOT,
        env=env,
    )
    try:

        def status() -> int:
            try:
                return httpx.get(
                    f"http://127.0.0.1:{port}/api/status",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=2,
                ).status_code
            except httpx.HTTPError:
                return 0

        wait_until(lambda: status() == 200, 30.0, "the admin app reading the router")
    finally:
        process.terminate()
        assert process.wait(15) == 0
