"""The workloads' CPU requests are the e2e benchmark's figures, as the manifests say.

``docs/benchmarks.md`` (``switchboard bench e2e``, full run, the per-role table) gives
the stack's cores and each role's share at 64 clients; the ``2 workers`` row is the
shape the manifests run (2 workers per pod). A worker pod requests the workers' share of
the stack's cores, the control pod every other role's, each rounded to 10 millicores;
the comment beside each request names the figures it comes from. No benchmark measures
memory, so neither sets a memory request (a made-up one would be worse than none).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.integration.harness.k8s_render import K8S

BENCHMARKS = Path(__file__).resolve().parents[3] / "docs" / "benchmarks.md"
ROW = "2 workers"
#: The roles a control pod runs (everything but the HTTP workers).
CONTROL_ROLES = ("router", "detok-router", "detokenizers", "engine", "supervisor")


def role_table() -> dict[str, str]:
    """The ``2 workers`` row of the e2e per-role CPU table, by column name."""
    lines = BENCHMARKS.read_text(encoding="utf-8").splitlines()
    header = next(
        index
        for index, line in enumerate(lines)
        if line.startswith("| config | stack cores |") and "| workers |" in line
    )
    names = [cell.strip() for cell in lines[header].strip("|").split("|")]
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip().strip("*") for cell in line.strip("|").split("|")]
        if cells[0] == ROW:
            return dict(zip(names, cells, strict=True))
    raise AssertionError(f"no {ROW!r} row in the e2e role table of {BENCHMARKS}")


def percent(cell: str) -> float:
    return float(cell.removesuffix("%")) / 100


def millicores(cores: float) -> int:
    """Cores as a request, rounded to 10 millicores."""
    return round(cores * 100) * 10


def request(file: str) -> tuple[dict[str, str], str]:
    """The one container's resource requests in ``base/FILE``, and the file's text."""
    text = (K8S / "base" / file).read_text(encoding="utf-8")
    container = yaml.safe_load(text)["spec"]["template"]["spec"]["containers"][0]
    requests: dict[str, str] = container["resources"]["requests"]
    return requests, text


@pytest.fixture(scope="module")
def figures() -> dict[str, str]:
    return role_table()


class TestRequests:
    def test_a_worker_pod_requests_the_workers_share(self, figures: dict[str, str]) -> None:
        """workers' share x stack cores, and the comment quotes both figures."""
        stack = float(figures["stack cores"])
        requests, text = request("workers.yaml")
        expected = millicores(stack * percent(figures["workers"]))
        assert requests == {"cpu": f"{expected}m"}
        assert f"{figures['stack cores']} stack cores" in text and figures["workers"] in text

    def test_the_control_requests_every_other_roles_share(self, figures: dict[str, str]) -> None:
        """(router + detok-router + detokenizers + engine + supervisor) x stack cores."""
        stack = float(figures["stack cores"])
        share = sum(percent(figures[role]) for role in CONTROL_ROLES)
        requests, text = request("control.yaml")
        assert requests == {"cpu": f"{millicores(stack * share)}m"}
        quoted = re.sub(r"\s+#\s*", " ", text)
        for role in CONTROL_ROLES:
            assert f"{role} {figures[role]}" in quoted, role

    def test_the_row_is_the_manifests_shape(self, figures: dict[str, str]) -> None:
        """The figures are of 2 workers, as many as a worker pod runs."""
        _, text = request("workers.yaml")
        workers = yaml.safe_load(text)["spec"]["template"]["spec"]["containers"][0]["env"]
        count = next(item["value"] for item in workers if item["name"] == "SWITCHBOARD_WORKERS")
        assert f"{count} workers" == ROW
