"""``deploy/k8s`` builds and every object it renders is valid.

``kubectl kustomize`` builds the base and the example overlay (its secrets made by its own
``make-secrets.sh``, in a copy). Every built-in object validates with kubernetes-validate
``--strict`` (unknown fields refused) against Kubernetes :data:`KUBERNETES`. The two
Prometheus Operator objects are custom resources, which kubernetes-validate has no
schema for: their structure is checked against the JSON Schemas below, written for the
fields of ``monitoring.coreos.com/v1`` this project uses (unknown fields refused at every
level, so a misspelt key fails), not copied from the operator's CRDs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.integration.harness.k8s_render import K8S, Rendered, kustomize, rendered

#: The Kubernetes version the manifests are validated against (kubernetes-validate's schemas).
KUBERNETES = "1.30.0"
#: Prometheus's duration form, as the operator's CRDs restrict ``for`` and ``interval``.
DURATION = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def _closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


METADATA = _closed(
    {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": STRING_MAP},
    ("name",),
)
SERVICE_MONITOR = _closed(
    {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": METADATA,
        "spec": _closed(
            {
                "jobLabel": {"type": "string"},
                "selector": _closed({"matchLabels": STRING_MAP}),
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": _closed(
                        {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": DURATION},
                            "authorization": _closed(
                                {
                                    "type": {"type": "string"},
                                    "credentials": _closed(
                                        {"name": {"type": "string"}, "key": {"type": "string"}},
                                        ("key",),
                                    ),
                                }
                            ),
                        },
                        ("port",),
                    ),
                },
            },
            ("selector", "endpoints"),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)
RULE = _closed(
    {
        "alert": {"type": "string"},
        "record": {"type": "string"},
        "expr": {"type": ["string", "integer"]},
        "for": {"type": "string", "pattern": DURATION},
        "keep_firing_for": {"type": "string", "pattern": DURATION},
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
    },
    ("expr",),
)
PROMETHEUS_RULE = _closed(
    {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": METADATA,
        "spec": _closed(
            {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": _closed(
                        {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": DURATION},
                            "rules": {"type": "array", "items": RULE},
                        },
                        ("name", "rules"),
                    ),
                }
            },
            ("groups",),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)
CUSTOM = {"ServiceMonitor": SERVICE_MONITOR, "PrometheusRule": PROMETHEUS_RULE}


@pytest.fixture(scope="module")
def base() -> Rendered:
    return kustomize(K8S / "base")


@pytest.fixture(scope="module")
def overlay(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return rendered(tmp_path_factory.mktemp("k8s"))


def invalid_builtin(item: dict[str, Any]) -> str | None:
    """kubernetes-validate's complaint about ``item`` (strict, :data:`KUBERNETES`), if any."""
    try:
        kubernetes_validate.validate(item, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return f"{item['kind']} {item['metadata']['name']}: {exc.message} at {list(exc.path)}"
    return None


def invalid_custom(item: dict[str, Any]) -> str | None:
    """The first structural problem of a ServiceMonitor or PrometheusRule, if any."""
    errors = sorted(jsonschema.Draft7Validator(CUSTOM[item["kind"]]).iter_errors(item), key=str)
    return f"{item['kind']}: {errors[0].message} at {list(errors[0].path)}" if errors else None


class TestBuild:
    def test_the_base_builds_without_secrets(self, base: Rendered) -> None:
        """The base holds both workloads, their Services, the policy, the monitoring objects
        and the hook's ConfigMap, and no Secret (those are the overlay's)."""
        kinds = sorted(item["kind"] for item in base.objects)
        assert kinds == [
            "ConfigMap",
            "Deployment",
            "Deployment",
            "NetworkPolicy",
            "PrometheusRule",
            "Service",
            "Service",
            "Service",
            "ServiceMonitor",
        ]

    def test_the_overlay_builds_with_its_generated_secrets(self, overlay: Rendered) -> None:
        """Every Secret a workload names exists in the overlay (hash-suffixed names rewritten
        by kustomize), and everything lands in the overlay's namespace."""
        names = {item["metadata"]["name"] for item in overlay.of_kind("Secret")}
        for deployment in ("switchboard-control", "switchboard-workers"):
            spec = overlay.pod_spec(deployment)
            wanted = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
            wanted |= {
                variable["valueFrom"]["secretKeyRef"]["name"]
                for variable in spec["containers"][0]["env"]
                if "valueFrom" in variable
            }
            assert wanted and wanted <= names, (deployment, wanted - names)
        namespaced = [item for item in overlay.objects if item["kind"] != "Namespace"]
        assert {item["metadata"].get("namespace") for item in namespaced} == {"switchboard"}

    def test_no_secret_is_committed(self) -> None:
        """git tracks no key or token under deploy/k8s; the overlay ignores secrets/."""
        tracked = subprocess.run(
            ["git", "ls-files", str(K8S)],
            capture_output=True,
            text=True,
            cwd=K8S,
            check=True,
        ).stdout.split()
        assert tracked and not [path for path in tracked if "secrets/" in path]
        assert (K8S / "overlays" / "example" / ".gitignore").read_text() == "secrets/\n"


class TestValidation:
    def test_every_builtin_object_validates_strictly(self, overlay: Rendered) -> None:
        """Namespace, ConfigMap, Secrets, Services, Deployments and NetworkPolicy all pass."""
        builtin = [item for item in overlay.objects if item["kind"] not in CUSTOM]
        assert len(builtin) == 12
        assert [problem for problem in map(invalid_builtin, builtin) if problem] == []

    def test_the_command_line_validates_the_rendered_file(
        self, overlay: Rendered, tmp_path: Path
    ) -> None:
        """``kubernetes-validate --strict -k 1.30.0`` on the built-in objects, as an
        operator runs it on kustomize's output, exits 0."""
        path = tmp_path / "rendered.yaml"
        builtin = [item for item in overlay.objects if item["kind"] not in CUSTOM]
        path.write_text(yaml.safe_dump_all(builtin), encoding="utf-8")
        tool = Path(sys.executable).with_name("kubernetes-validate")
        done = subprocess.run(
            [str(tool), "--strict", "--quiet", "-k", KUBERNETES, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def test_strict_validation_refuses_an_unknown_field(self, overlay: Rendered) -> None:
        """The check can fail: a misspelt probe field is refused."""
        broken = overlay.named("Deployment", "switchboard-workers")
        container = broken["spec"]["template"]["spec"]["containers"][0]
        container["readinessProbe"]["periodSecond"] = 2
        assert "periodSecond" in str(invalid_builtin(broken))

    def test_the_custom_resources_have_the_operators_structure(
        self, overlay: Rendered, base: Rendered
    ) -> None:
        """ServiceMonitor and PrometheusRule match their schemas, in base and overlay."""
        custom = [item for item in [*overlay.objects, *base.objects] if item["kind"] in CUSTOM]
        assert sorted(item["kind"] for item in custom) == sorted([*CUSTOM, *CUSTOM])
        assert [problem for problem in map(invalid_custom, custom) if problem] == []

    def test_the_structure_check_refuses_a_wrong_field(self, overlay: Rendered) -> None:
        """The check can fail: an endpoint's ``intervall`` and a rule's bad ``for``."""
        monitor = overlay.named("ServiceMonitor", "switchboard")
        monitor["spec"]["endpoints"][0]["intervall"] = "5s"
        assert "intervall" in str(invalid_custom(monitor))
        rule = overlay.named("PrometheusRule", "switchboard-alerts")
        rule["spec"]["groups"][0]["rules"][0]["for"] = "one minute"
        assert "one minute" in str(invalid_custom(rule))


def test_the_overlay_copy_leaves_the_repository_clean(tmp_path: Path) -> None:
    """make-secrets.sh writes into the copy only, and refuses to overwrite what it made."""
    overlay = tmp_path / "k8s" / "overlays" / "example"
    rendered(tmp_path)
    assert (overlay / "secrets" / "stack.key").stat().st_mode & 0o077 == 0
    assert not (K8S / "overlays" / "example" / "secrets").exists()
    again = subprocess.run(
        [str(overlay / "make-secrets.sh")], capture_output=True, text=True, check=False
    )
    assert again.returncode != 0
