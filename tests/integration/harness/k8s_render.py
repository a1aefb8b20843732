"""The Kubernetes manifests rendered as an operator renders them: ``deploy/k8s`` copied to a
temporary directory, the example overlay's secrets made with its own ``make-secrets.sh``
(``switchboard keys generate`` / ``keys stack`` and openssl), then ``kubectl kustomize``.

:func:`rendered` returns a :class:`Rendered`: the objects of one ``kubectl kustomize`` of
a directory, with lookups by kind and name. Without kubectl (or openssl) the test is
skipped, and fails under ``CI=true``.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.integration.harness.polling import missing

__all__ = ["K8S", "Rendered", "kustomize", "overlay_copy", "rendered"]

REPO = Path(__file__).resolve().parents[3]
K8S = REPO / "deploy" / "k8s"
EXAMPLE = Path("overlays") / "example"
KUSTOMIZE_TIMEOUT_S = 60


@dataclass(frozen=True)
class Rendered:
    """Every object one ``kubectl kustomize`` printed, in its order."""

    objects: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [item for item in self.objects if item["kind"] == kind]

    def named(self, kind: str, name: str) -> dict[str, Any]:
        """The one ``kind`` called ``name``, or (for a generated ConfigMap or Secret) whose
        name is ``name`` and kustomize's hash suffix."""
        found = [
            item
            for item in self.of_kind(kind)
            if item["metadata"]["name"] == name
            or item["metadata"]["name"].rsplit("-", 1)[0] == name
        ]
        assert len(found) == 1, f"{len(found)} {kind} named {name}"
        return found[0]

    def pod_spec(self, deployment: str) -> dict[str, Any]:
        spec: dict[str, Any] = self.named("Deployment", deployment)["spec"]["template"]["spec"]
        return spec

    def secret_data(self, name: str) -> dict[str, str]:
        """A Secret's values, decoded (by its full, generated name)."""
        secret = next(item for item in self.of_kind("Secret") if item["metadata"]["name"] == name)
        return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def kustomize(directory: Path) -> Rendered:
    """``kubectl kustomize directory``, parsed; the test fails with kubectl's message."""
    if shutil.which("kubectl") is None:
        missing("kubectl, to render the Kubernetes manifests")
    done = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=KUSTOMIZE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"kubectl kustomize {directory}:\n{done.stderr}"
    return Rendered([item for item in yaml.safe_load_all(done.stdout) if item])


def overlay_copy(into: Path) -> Path:
    """``deploy/k8s`` copied into ``into`` with the example overlay's secrets made by its
    ``make-secrets.sh`` (run with this interpreter's ``switchboard``); the overlay's path."""
    if shutil.which("openssl") is None:
        missing("openssl, for the example overlay's make-secrets.sh")
    copy = into / "k8s"
    shutil.copytree(K8S, copy, ignore=shutil.ignore_patterns("secrets", "__pycache__"))
    overlay = copy / EXAMPLE
    switchboard = f"{sys.executable} -m switchboard.cli"
    done = subprocess.run(
        [str(overlay / "make-secrets.sh")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "SWITCHBOARD": switchboard, "HOME": str(into)},
        cwd=REPO,
        timeout=KUSTOMIZE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"make-secrets.sh:\n{done.stdout}\n{done.stderr}"
    return overlay


def rendered(into: Path) -> Rendered:
    """The example overlay rendered with freshly made secrets (see the module docstring)."""
    return kustomize(overlay_copy(into))
