"""CURVE keys for tests of the worker gateway: a control host, an authorised worker host
and an intruder, made with ``switchboard keys generate`` as an operator would."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GatewayKeys", "free_gateway_listen", "gateway_keys"]


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
