"""CURVE keys for tests of the worker gateway: a control host, an authorised worker host
and an intruder, made with ``switchboard keys generate`` as an operator would; and
:func:`assert_intruder_refused`, the check that the intruder's worker is turned away."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.integration.harness.admin_stack import AdminStack
from tests.integration.harness.polling import wait_until
from tests.integration.harness.scrape import sample_sum, scrape

__all__ = ["GatewayKeys", "assert_intruder_refused", "free_gateway_listen", "gateway_keys"]

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class GatewayKeys:
    """Key files in one private directory; only ``host-a`` is authorised."""

    directory: Path

    def secret(self, name: str) -> Path:
        return self.directory / f"{name}.secret"

    def public(self, name: str) -> Path:
        return self.directory / f"{name}.public"

    @property
    def authorised(self) -> Path:
        return self.directory / "authorised_keys"

    def stack_args(self, listen: str) -> tuple[str, ...]:
        """``switchboard up`` flags for a gateway at ``listen`` with these keys."""
        return (
            *("--gateway-listen", listen),
            *("--curve-key-pair", str(self.secret("control"))),
            *("--authorised-keys", str(self.authorised)),
        )

    def worker_args(self, gateway: str, host: str, key_file: Path) -> tuple[str, ...]:
        """``switchboard worker`` flags for a worker on host ``host`` behind ``gateway``."""
        return (
            *("--gateway", gateway),
            *("--curve-key-pair", str(self.secret(host))),
            *("--gateway-public-key", str(self.public("control"))),
            *("--key-file", str(key_file)),
        )


def gateway_keys(directory: Path) -> GatewayKeys:
    """Generate ``control``, ``host-a`` and ``intruder`` in ``directory`` (made 0700) and
    authorise ``host-a`` alone."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in ("control", "host-a", "intruder"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "switchboard.cli",
                "keys",
                "generate",
                name,
                "--dir",
                str(directory),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    keys = GatewayKeys(directory)
    keys.authorised.write_text(f"# worker hosts\n{keys.public('host-a').read_text()}")
    return keys


def free_gateway_listen(tries: int = 50) -> str:
    """``tcp://127.0.0.1:PORT`` with PORT and PORT+1 free now (the gateway takes both)."""
    for _ in range(tries):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            if port >= 65535:
                continue
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return f"tcp://127.0.0.1:{port}"
    raise AssertionError(f"no two free consecutive loopback ports in {tries} tries")


def assert_intruder_refused(
    control: AdminStack,
    argv: Sequence[str],
    worker_id: str,
    listed: Callable[[], Collection[str]],
    deadline_s: float = 30.0,
) -> None:
    """``argv`` (a worker with the intruder's key, as ``worker_id``) exits 2 at start with
    one line saying its key was refused; the control host's gateway counts it
    (``switchboard_refused_connections_total{reason="unknown_key"}`` grows) and
    ``listed()`` (the worker ids the control host lists) never holds it."""

    def refused() -> float:
        return sample_sum(
            scrape(control),
            "switchboard_refused_connections_total",
            process="gateway",
            reason="unknown_key",
        )

    before = refused()
    done = subprocess.run(
        list(argv), capture_output=True, text=True, cwd=REPO, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "refused this host's key" in done.stderr.strip().splitlines()[-1]
    wait_until(lambda: refused() > before, deadline_s, "the refusal counted")
    assert worker_id not in listed()
