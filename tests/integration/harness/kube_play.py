"""The rendered Kubernetes workloads run with ``podman kube play``, on a podman network of
the test's own.

podman 4.3 plays Deployments (every replica: ``NAME-pod-0``, ``NAME-pod-1``, ...) but not
all of Kubernetes, so :func:`playable` adapts each rendered Deployment in four ways, and
nothing else (each is what the cluster would do):

* Services are not played: the worker pods get ``hostAliases`` naming the control pod's
  address ``switchboard-gateway`` and ``switchboard-admin``, as cluster DNS would;
* a ``secretKeyRef`` in ``env`` fails there (``secret ... is not valid JSON``), so the
  harness puts the Secret's value in ``value``;
* a Secret volume holds the values as podman stores them, base64 left undecoded, so the
  harness makes each mounted Secret with ``podman secret create`` from decoded values;
* every ``containerPort`` would be published on the host's every interface, so ``ports``
  are dropped and the probes name the port numbers.

podman schedules no probes here (no systemd) and runs no ``preStop`` hook: the test waits
on ``/health`` itself and runs the hook with ``podman exec``. A pod's infra container needs
``catatonit``; without it the test is skipped, and fails under ``CI=true``. :func:`played`
owns everything it makes (pods, secrets, network) and removes it at the end.
"""

from __future__ import annotations

import contextlib
import copy
import json
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.integration.harness.container import Image
from tests.integration.harness.k8s_render import Rendered
from tests.integration.harness.polling import missing

__all__ = ["Played", "playable", "played"]

#: The Services' names a worker pod resolves to the control pod.
CONTROL_NAMES = ("switchboard-gateway", "switchboard-admin")
PLAY_TIMEOUT_S = 120.0


@dataclass
class Played:
    """What :func:`played` made: the podman network, secrets and played files."""

    image: Image
    network: str
    directory: Path
    secrets: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def podman(self, *arguments: str, timeout: float = 60.0) -> Any:
        return self.image.podman(*arguments, timeout=timeout)

    def address(self, pod: str) -> str:
        """The pod's address on the test's network (its infra container's)."""
        infra = self.podman("pod", "inspect", pod, "--format", "{{.InfraContainerID}}")
        assert infra.returncode == 0, infra.stderr
        template = f'{{{{(index .NetworkSettings.Networks "{self.network}").IPAddress}}}}'
        found = self.podman("inspect", infra.stdout.strip(), "--format", template)
        assert found.returncode == 0 and found.stdout.strip(), found.stderr
        return str(found.stdout.strip())

    def play(self, objects: list[dict[str, Any]], name: str) -> None:
        """``podman kube play`` of ``objects`` (written to ``name``.yaml) on the network."""
        path = self.directory / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
        self.files.append(path)
        done = self.podman(
            "kube", "play", "--network", self.network, str(path), timeout=PLAY_TIMEOUT_S
        )
        assert done.returncode == 0, f"podman kube play {name}:\n{done.stderr}"

    def create_secret(self, name: str, data: dict[str, str]) -> None:
        path = self.directory / f"secret-{name}.json"
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data}
        path.write_text(json.dumps(body), encoding="utf-8")
        done = self.podman("secret", "create", name, str(path))
        assert done.returncode == 0, done.stderr
        self.secrets.append(name)
        path.unlink()

    def logs(self, container: str) -> str:
        done = self.podman("logs", container)
        return str(done.stdout + done.stderr)


def playable(
    rendered: Rendered, deployment: str, control_address: str | None
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """``deployment`` adapted for podman (see the module docstring), and the Secrets its
    volumes mount, by name, with decoded values."""
    adapted = copy.deepcopy(rendered.named("Deployment", deployment))
    spec = adapted["spec"]["template"]["spec"]
    mounted = {
        volume["secret"]["secretName"]: rendered.secret_data(volume["secret"]["secretName"])
        for volume in spec["volumes"]
        if "secret" in volume
    }
    for container in spec["containers"]:
        ports = {port["name"]: port["containerPort"] for port in container.pop("ports", [])}
        for variable in container.get("env", []):
            reference = variable.get("valueFrom", {}).get("secretKeyRef")
            if reference is not None:
                del variable["valueFrom"]
                variable["value"] = rendered.secret_data(reference["name"])[reference["key"]]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            action = container.get(probe, {}).get("httpGet")
            if action is not None:
                action["port"] = ports[action["port"]]
    if control_address is not None:
        spec["hostAliases"] = [{"ip": control_address, "hostnames": list(CONTROL_NAMES)}]
    return adapted, mounted


@contextlib.contextmanager
def played(image: Image, directory: Path) -> Iterator[Played]:
    """A podman network of its own for the test to play workloads on (see
    :meth:`Played.play`); every pod, secret and the network removed at the end."""
    if shutil.which("catatonit") is None:
        missing("catatonit, for podman's pod infra containers (podman kube play)")
    network = f"sb-k8s-{secrets.token_hex(4)}"
    made = image.podman("network", "create", network)
    assert made.returncode == 0, made.stderr
    run = Played(image, network, directory)
    try:
        yield run
    finally:
        for path in reversed(run.files):
            run.podman("kube", "play", "--down", str(path), timeout=PLAY_TIMEOUT_S)
        for name in run.secrets:
            run.podman("secret", "rm", name)
        run.podman("network", "rm", "--force", network)
