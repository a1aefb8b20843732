"""The shipped Prometheus config and alert rules pass Prometheus's own checks.

``promtool`` (Debian's ``prometheus`` package) checks ``deploy/prometheus/prometheus.yml``
and ``alerts.yml`` and runs the rule unit tests in ``alerts_test.yml``, on copies in a
temporary directory (promtool resolves the files each one names beside it). Without
promtool these tests skip, and fail under ``CI=true``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import running_in_ci

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "prometheus"
FILES = ("prometheus.yml", "alerts.yml", "alerts_test.yml")
#: Every alert the rules must define (issue 5, and the admin app's router_up gauge).
ALERTS = frozenset(
    {
        "SwitchboardWorkerDown",
        "SwitchboardNoWorkerServing",
        "SwitchboardPausedTooLong",
        "SwitchboardDropsHigh",
        "SwitchboardRejectsHigh",
        "SwitchboardHopLatencyHigh",
        "SwitchboardScrapeDown",
        "SwitchboardRouterUnreachable",
    }
)


@pytest.fixture(scope="module")
def promtool() -> str:
    """The promtool executable; missing, it skips here and fails under CI=true."""
    found = shutil.which("promtool")
    if found is None:
        reason = "promtool not found (apt-get install prometheus)"
        if running_in_ci():
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return found


@pytest.fixture
def deploy_copy(tmp_path: Path) -> Path:
    """The three files copied into a temporary directory."""
    for name in FILES:
        shutil.copy(DEPLOY / name, tmp_path / name)
    return tmp_path


def run(promtool: str, directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, *args], cwd=directory, capture_output=True, text=True, timeout=60, check=False
    )


def rules() -> list[dict[str, object]]:
    document = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


class TestPromtool:
    def test_check_config(self, promtool: str, deploy_copy: Path) -> None:
        """``promtool check config`` accepts prometheus.yml and the rule file it loads."""
        result = run(promtool, deploy_copy, "check", "config", "prometheus.yml")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS: 1 rule files found" in result.stdout

    def test_check_rules(self, promtool: str, deploy_copy: Path) -> None:
        """``promtool check rules`` finds every rule valid and nothing to lint."""
        result = run(
            promtool, deploy_copy, "check", "rules", "--lint=all", "--lint-fatal", "alerts.yml"
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout

    def test_rule_unit_tests_pass(self, promtool: str, deploy_copy: Path) -> None:
        """``promtool test rules alerts_test.yml`` passes."""
        result = run(promtool, deploy_copy, "test", "rules", "alerts_test.yml")
        assert result.returncode == 0, result.stdout + result.stderr

    def test_a_broken_rule_fails_its_unit_test(self, promtool: str, deploy_copy: Path) -> None:
        """The unit tests are not vacuous: raising the pause threshold makes them fail."""
        alerts = deploy_copy / "alerts.yml"
        text = alerts.read_text()
        assert text.count("> 15 * 60") == 1
        alerts.write_text(text.replace("> 15 * 60", "> 60 * 60"))
        result = run(promtool, deploy_copy, "test", "rules", "alerts_test.yml")
        assert result.returncode != 0
        assert "SwitchboardPausedTooLong" in result.stdout + result.stderr


class TestRuleSet:
    def test_exactly_the_listed_alerts(self) -> None:
        """alerts.yml defines each required alert once, and no other."""
        names = [str(rule["alert"]) for rule in rules()]
        assert sorted(names) == sorted(ALERTS)

    def test_every_alert_has_severity_for_and_annotations(self) -> None:
        """Each alert has a ``for``, a severity of warning or critical, and a summary,
        a description and a runbook that points at the docs."""
        for rule in rules():
            labels, annotations = rule["labels"], rule["annotations"]
            assert isinstance(labels, dict) and isinstance(annotations, dict), rule
            assert rule.get("for"), rule["alert"]
            assert labels.get("severity") in ("warning", "critical"), rule["alert"]
            assert set(annotations) == {"summary", "description", "runbook"}, rule["alert"]
            assert "docs/" in annotations["runbook"], rule["alert"]

    def test_every_alert_has_a_unit_test(self) -> None:
        """alerts_test.yml evaluates every alert, at a time it fires and a time it must not."""
        document = yaml.safe_load((DEPLOY / "alerts_test.yml").read_text())
        checks = [check for test in document["tests"] for check in test["alert_rule_test"]]
        firing = {check["alertname"] for check in checks if check.get("exp_alerts")}
        quiet = {check["alertname"] for check in checks if not check.get("exp_alerts")}
        assert firing == ALERTS
        assert quiet == ALERTS
