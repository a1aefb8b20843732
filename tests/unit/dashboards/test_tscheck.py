"""Tests for dashboards.tscheck: the committed dashboards type-check against
``@grafana/schema``, and the check catches wrong types and unknown keys."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from dashboards import JSON_DIR
from dashboards.tscheck import missing_toolchain, typecheck
from tests.conftest import running_in_ci
from tests.unit.dashboards.committed import load


def require_toolchain() -> None:
    """Skip (locally) or fail (under CI=true) when node or the npm packages are missing."""
    reason = missing_toolchain()
    if reason is None:
        return
    if running_in_ci():
        pytest.fail(f"CI=true: the dashboard type check cannot run: {reason}")
    pytest.skip(reason)


class TestTypeCheck:
    def test_dashboards_type_check_against_grafana_schema(self) -> None:
        """``tsc --strict`` accepts every committed dashboard as a ``@grafana/schema`` Dashboard."""
        require_toolchain()
        result = typecheck(sorted(JSON_DIR.glob("*.json")))
        assert result.returncode == 0, result.stdout + result.stderr

    def test_type_check_catches_wrong_types_and_unknown_keys(self, tmp_path: Path) -> None:
        """A string grid height, an unknown enum value and a misspelt key each fail the check."""
        require_toolchain()
        model = load("switchboard-overview")
        breakages = {
            "height": lambda panel: panel["gridPos"].update(h="8"),
            "enum": lambda panel: panel["fieldConfig"]["defaults"].update(
                thresholds={"mode": "absolutely", "steps": []}
            ),
            "key": lambda panel: panel.update(titel="typo"),
        }
        paths = []
        for name, breakage in breakages.items():
            broken = copy.deepcopy(model)
            breakage(broken["panels"][1])
            path = tmp_path / f"broken-{name}.json"
            path.write_text(json.dumps(broken), encoding="utf-8")
            paths.append(path)
        output = typecheck(paths).stdout
        for name in breakages:
            assert f"broken-{name}.ts" in output, output
