"""Switchboard's container image, built and run with podman as an operator would.

:func:`built_image` runs ``deploy/container/build-image.sh`` (the base image and the
dependency wheels are cached between runs; the switchboard wheel is built afresh) and
returns the tag and the environment podman needs here (``CONTAINERS_CONF``, which the
script writes). :func:`running_container` starts one container with its ports published
on loopback and removes it at the end. Without podman or mmdebstrap the test is
skipped, and fails under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import missing

__all__ = ["Container", "Image", "built_image", "running_container"]

REPO = Path(__file__).resolve().parents[3]
BUILD_TIMEOUT_S = 900


@dataclass(frozen=True)
class Image:
    tag: str
    env: dict[str, str]

    def podman(self, *arguments: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", *arguments],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )


@dataclass(frozen=True)
class Container:
    image: Image
    name: str
    base_url: str
    admin_url: str
    operator_token: str

    def inspect(self) -> dict[str, object]:
        done = self.image.podman("inspect", self.name)
        assert done.returncode == 0, done.stderr
        found: list[dict[str, object]] = json.loads(done.stdout)
        return found[0]

    def logs(self) -> str:
        done = self.image.podman("logs", self.name)
        return done.stdout + done.stderr


def built_image(cache: Path) -> Image:
    """Build ``localhost/switchboard:test`` (see the module docstring)."""
    for tool in ("podman", "mmdebstrap"):
        if shutil.which(tool) is None:
            missing(f"{tool}, for the container image")
    env = {**os.environ, "PYTHON": sys.executable, "SWITCHBOARD_IMAGE_CACHE": str(cache)}
    tag = "localhost/switchboard:test"
    done = subprocess.run(
        [str(REPO / "deploy" / "container" / "build-image.sh"), tag],
        capture_output=True,
        text=True,
        env=env,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"build-image.sh failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return Image(tag, {**os.environ, "CONTAINERS_CONF": str(cache / "containers.conf")})


@contextlib.contextmanager
def running_container(image: Image, arguments: Sequence[str] = ()) -> Iterator[Container]:
    """``podman run -d`` of the image with ``switchboard up`` ``arguments``, its ports on
    loopback and a configured operator token; removed (``podman rm -f``) at the end."""
    name = f"sb-test-{secrets.token_hex(4)}"
    port, admin_port = free_port(), free_port()
    token = secrets.token_hex(24)
    done = image.podman(
        "run",
        "--detach",
        *("--name", name),
        *("--publish", f"127.0.0.1:{port}:8000", "--publish", f"127.0.0.1:{admin_port}:8001"),
        *("--env", f"SWITCHBOARD_ADMIN_OPERATOR_TOKENS=ops:{token}"),
        image.tag,
        *arguments,
    )
    assert done.returncode == 0, done.stderr
    try:
        yield Container(
            image, name, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin_port}", token
        )
    finally:
        image.podman("rm", "--force", "--time", "2", name)
