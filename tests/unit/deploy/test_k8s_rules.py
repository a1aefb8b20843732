"""The PrometheusRule in ``deploy/k8s/base`` is generated from ``deploy/prometheus/alerts.yml``.

The committed file is exactly what ``deploy/k8s/generate_rules.py`` makes from the rule
file (so an alert edited in one place and not regenerated fails here), its groups are the
rule file's groups unchanged, and ``--check`` notices a stale file.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.integration.harness.k8s_render import K8S

GENERATOR = K8S / "generate_rules.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    """deploy/k8s/generate_rules.py, imported from its path (deploy/ is no package)."""
    spec = importlib.util.spec_from_file_location("generate_rules", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestGeneratedRules:
    def test_the_committed_rule_is_what_the_generator_makes(self, generator: ModuleType) -> None:
        """Byte for byte: alerts.yml rendered now equals base/prometheusrule.yaml."""
        made = generator.render(generator.ALERTS.read_text(encoding="utf-8"))
        assert generator.RULE_FILE.read_text(encoding="utf-8") == made

    def test_its_groups_are_the_rule_files(self, generator: ModuleType) -> None:
        """spec.groups holds every group and rule of alerts.yml, unchanged."""
        committed = yaml.safe_load(generator.RULE_FILE.read_text(encoding="utf-8"))
        alerts = yaml.safe_load(generator.ALERTS.read_text(encoding="utf-8"))
        assert committed["kind"] == "PrometheusRule"
        assert committed["spec"]["groups"] == alerts["groups"]

    def test_a_changed_alert_makes_a_different_rule(self, generator: ModuleType) -> None:
        """The comparison can fail: one threshold changed in alerts.yml changes the output."""
        text = generator.ALERTS.read_text(encoding="utf-8")
        changed = text.replace("for: 1m", "for: 2m", 1)
        assert changed != text
        assert generator.render(changed) != generator.render(text)
        with pytest.raises(ValueError, match="no groups"):
            generator.prometheus_rule({"groups": []})

    def test_check_exits_nonzero_on_a_stale_file(
        self, generator: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """--check exits 0 on the committed file and 1 on a stale copy (run as a script)."""
        ok = subprocess.run(
            [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, check=False
        )
        assert ok.returncode == 0, ok.stdout
        stale = tmp_path / "prometheusrule.yaml"
        stale.write_text(generator.RULE_FILE.read_text().replace("1m", "3m", 1))
        monkeypatch.setattr(generator, "RULE_FILE", stale)
        assert generator.main(["--check"]) == 1
