"""``deploy/compose.yaml`` run with ``podman-compose`` as an operator would.

:func:`compose_tool` finds ``podman-compose`` (the one installed beside this Python
first). :func:`prometheus_image` makes the image the ``prometheus`` service runs here:
no registry is reachable, so it is switchboard's base image with the machine's own
Prometheus binary in it (Debian's), run as ``nobody`` from ``/prometheus`` as the
upstream image is. :func:`compose_stack` brings the stack up under a project name of its
own, its published ports on free loopback ports, and at the end takes down whatever of
that project is left (containers, volumes, network), even when the test failed; the test
itself checks that its own ``stop`` and ``down`` leave nothing.

Grafana is not run: there is no Grafana image or server on this kind of machine
(``TOOLCHAIN.md``); its service is checked as configuration.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.integration.harness.container import Image
from tests.integration.harness.http_stack import free_port
from tests.integration.harness.polling import missing

__all__ = ["COMPOSE_FILE", "ComposeStack", "compose_stack", "compose_tool", "prometheus_image"]

REPO = Path(__file__).resolve().parents[3]
COMPOSE_FILE = REPO / "deploy" / "compose.yaml"
PROMETHEUS_TAG = "localhost/switchboard-prometheus:test"
#: The services the test runs: every one but Grafana (see the module docstring).
SERVICES = ("secrets", "control", "worker", "prometheus")
#: podman-compose's own commands (create, start, stop) take a few seconds each.
COMMAND_S = 180.0
_PROJECT_LABEL = "io.podman.compose.project"
_SERVICE_LABEL = "io.podman.compose.service"


def compose_tool() -> str:
    """The ``podman-compose`` executable; missing (skip, or fail under CI) without one."""
    beside = Path(sys.executable).parent / "podman-compose"
    found = str(beside) if beside.exists() else shutil.which("podman-compose")
    if found is None:
        missing("podman-compose (the test extra of pyproject.toml)")
    assert found is not None
    return found


def prometheus_image(image: Image) -> str:
    """Build :data:`PROMETHEUS_TAG` from the base image build-image.sh made and the
    machine's ``prometheus`` binary (seconds; rebuilt each run, so it is never stale)."""
    binary = shutil.which("prometheus")
    if binary is None:
        missing("prometheus (Debian's package), for the compose stack's prometheus service")
    assert binary is not None
    with tempfile.TemporaryDirectory(prefix="sb-prometheus-image-") as context:
        shutil.copy(binary, Path(context) / "prometheus")
        (Path(context) / "Containerfile").write_text(
            "FROM localhost/switchboard-base:bookworm\n"
            "COPY prometheus /bin/prometheus\n"
            "RUN mkdir -p /prometheus /etc/prometheus && chown 65534:65534 /prometheus\n"
            "USER 65534\n"
            "WORKDIR /prometheus\n"
            "EXPOSE 9090\n"
            'ENTRYPOINT ["/bin/prometheus"]\n'
        )
        done = image.podman("build", "--quiet", "--tag", PROMETHEUS_TAG, context, timeout=300)
    assert done.returncode == 0, done.stderr
    return PROMETHEUS_TAG


@dataclass(frozen=True)
class ComposeStack:
    """A running compose project and where its published ports are."""

    image: Image
    tool: str
    project: str
    env: dict[str, str]
    admin_url: str
    prometheus_url: str

    def compose(
        self, *arguments: str, timeout: float = COMMAND_S
    ) -> subprocess.CompletedProcess[str]:
        """``podman-compose -p PROJECT -f deploy/compose.yaml ARGUMENTS``."""
        return subprocess.run(
            [self.tool, "-p", self.project, "-f", str(COMPOSE_FILE), *arguments],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
            cwd=COMPOSE_FILE.parent,
        )

    def podman(self, *arguments: str) -> str:
        """podman's output, which must succeed."""
        done = self.image.podman(*arguments)
        assert done.returncode == 0, f"podman {arguments}: {done.stderr}"
        return done.stdout

    def containers(self, service: str | None = None) -> list[str]:
        """The names of this project's containers (of ``service``), running or not."""
        filters = ["--filter", f"label={_PROJECT_LABEL}={self.project}"]
        if service is not None:
            filters += ["--filter", f"label={_SERVICE_LABEL}={service}"]
        listed = self.podman("ps", "--all", *filters, "--format", "{{.Names}}")
        return sorted(listed.split())

    def inspect(self, name: str) -> dict[str, object]:
        """``podman inspect`` of one container."""
        found: list[dict[str, object]] = json.loads(self.podman("inspect", name))
        return found[0]

    def hostname(self, name: str) -> str:
        """A container's host name: what its workers' ids and ``host`` label begin with."""
        config = self.inspect(name)["Config"]
        assert isinstance(config, dict)
        return str(config["Hostname"])

    def address(self, name: str) -> str:
        """A container's address on the project's network."""
        settings = self.inspect(name)["NetworkSettings"]
        assert isinstance(settings, dict)
        (network,) = settings["Networks"].values()
        return str(network["IPAddress"])

    def published(self, name: str, port: int) -> str:
        """``http://127.0.0.1:PORT`` where the host reaches a container's ``port``."""
        where = self.podman("port", name, str(port)).split()[0]
        return f"http://{where}"

    def read(self, name: str, path: str) -> str:
        """A file inside a running container (a secret the test needs, such as a token)."""
        return self.podman("exec", name, "cat", path).strip()

    def volume(self, name: str) -> Path:
        """Where the project's volume ``name`` (as the compose file names it) is on the host."""
        where = f"{self.project}_{name}"
        return Path(self.podman("volume", "inspect", where, "--format", "{{.Mountpoint}}").strip())

    def logs(self, name: str) -> str:
        """One container's log, stdout and stderr."""
        done = self.image.podman("logs", name)
        return done.stdout + done.stderr

    def all_logs(self, tail: int = 4000) -> str:
        """Every container's log, each cut to its last ``tail`` characters."""
        return "\n".join(f"--- {n}\n{self.logs(n)[-tail:]}" for n in self.containers())

    def leftovers(self) -> dict[str, list[str]]:
        """What of this project exists: containers, volumes, networks, pods."""
        label = f"label={_PROJECT_LABEL}={self.project}"
        volumes = self.podman("volume", "ls", "--filter", label, "--format", "{{.Name}}")
        networks = self.podman("network", "ls", "--format", "{{.Name}}")
        pods = self.podman("pod", "ls", "--format", "{{.Name}}")
        return {
            "containers": self.containers(),
            "volumes": sorted(volumes.split()),
            "networks": [n for n in networks.split() if n.startswith(f"{self.project}_")],
            "pods": [p for p in pods.split() if self.project in p],
        }

    def remove_everything(self) -> None:
        """Force away whatever of the project is left (the fixture's last resort)."""
        left = self.leftovers()
        if left["containers"]:
            self.image.podman("rm", "--force", "--time", "2", *left["containers"], timeout=120)
        for volume in left["volumes"]:
            self.image.podman("volume", "rm", "--force", volume)
        for network in left["networks"]:
            self.image.podman("network", "rm", "--force", network)
        for pod in left["pods"]:
            self.image.podman("pod", "rm", "--force", pod)


@contextlib.contextmanager
def compose_stack(
    image: Image, *, workers_per_replica: int = 1, services: Sequence[str] = SERVICES
) -> Iterator[ComposeStack]:
    """``podman-compose up -d`` of ``services`` (see the module docstring); each worker
    replica runs ``workers_per_replica`` HTTP workers. Yields once ``up`` returned."""
    tool = compose_tool()
    prometheus = prometheus_image(image)
    admin_port, prometheus_port = free_port(), free_port()
    env = {
        **image.env,
        "SWITCHBOARD_IMAGE": image.tag,
        "PROMETHEUS_IMAGE": prometheus,
        "SWITCHBOARD_ADMIN_PUBLISH": f"127.0.0.1:{admin_port}",
        "PROMETHEUS_PUBLISH": f"127.0.0.1:{prometheus_port}",
        "SWITCHBOARD_WORKERS": str(workers_per_replica),
    }
    stack = ComposeStack(
        image,
        tool,
        f"sbcompose{secrets.token_hex(4)}",
        env,
        f"http://127.0.0.1:{admin_port}",
        f"http://127.0.0.1:{prometheus_port}",
    )
    try:
        up = stack.compose("up", "--detach", *services)
        assert up.returncode == 0, f"podman-compose up: {up.stdout}\n{up.stderr[-4000:]}"
        yield stack
    except BaseException:
        print(stack.all_logs())
        raise
    finally:
        if stack.containers():
            stack.compose("down", "--volumes", "--timeout", "5")
        stack.remove_everything()
