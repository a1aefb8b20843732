"""The documented way to copy ``deploy/prometheus/prometheus.yml`` elsewhere works, and
every documented Prometheus command listens on loopback only.

A copy that keeps ``rule_files: [alerts.yml]`` fails (Prometheus resolves it beside the
config file); the one-liner in ``docs/operating.md`` section 10 and ``deploy/README.md``
writes one with the absolute path and another admin port, and real ``promtool`` accepts
it from another directory. Without promtool the promtool tests skip, and fail under
``CI=true`` (the fixture of ``test_alert_rules``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.unit.deploy.test_alert_rules import DEPLOY, promtool

__all__ = ["promtool"]  # the fixture, shared with test_alert_rules

REPO = DEPLOY.parents[1]
#: The documented command; ``/tmp/sb-prometheus`` stands for wherever the copy goes.
COPY_COMMAND = (
    'sed -e "s|^  - alerts.yml|  - $PWD/deploy/prometheus/alerts.yml|" \\\n'
    '    -e "s|127.0.0.1:8001|127.0.0.1:9001|" \\\n'
    "    deploy/prometheus/prometheus.yml > /tmp/sb-prometheus/prometheus.yml"
)
DOCS_WITH_COPY = ("docs/operating.md", "deploy/README.md")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def _contains(text: str, command: str) -> bool:
    """Whether ``command``'s lines appear in ``text`` in a row (indentation aside)."""
    wanted, lines = _lines(command), _lines(text)
    return any(lines[i : i + len(wanted)] == wanted for i in range(len(lines)))


def _check(promtool: str, config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, "check", "config", str(config)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class TestCopyElsewhere:
    """The copy the docs write is a working config anywhere; a plain copy is not."""

    def test_docs_show_the_tested_command(self) -> None:
        """Both docs show exactly the command tested here."""
        for doc in DOCS_WITH_COPY:
            assert _contains((REPO / doc).read_text(), COPY_COMMAND), doc

    def test_plain_copy_loses_the_rules(self, promtool: str, tmp_path: Path) -> None:
        """prometheus.yml copied alone fails promtool: alerts.yml is not beside it."""
        shutil.copy(DEPLOY / "prometheus.yml", tmp_path / "prometheus.yml")
        result = _check(promtool, tmp_path / "prometheus.yml", tmp_path)
        assert result.returncode != 0
        assert "does not point to an existing file" in result.stdout + result.stderr

    def test_documented_copy_passes_promtool(self, promtool: str, tmp_path: Path) -> None:
        """Run from the repository, the command writes a copy promtool accepts from
        another directory, loading the 8 rules by absolute path, scraping port 9001."""
        script = COPY_COMMAND.replace("/tmp/sb-prometheus", str(tmp_path))
        subprocess.run(["bash", "-c", script], cwd=REPO, check=True, timeout=30)
        copy = tmp_path / "prometheus.yml"
        config = yaml.safe_load(copy.read_text())
        assert config["rule_files"] == [str(DEPLOY / "alerts.yml")]
        [job] = config["scrape_configs"]
        assert job["static_configs"] == [{"targets": ["127.0.0.1:9001"]}]
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        result = _check(promtool, copy, elsewhere)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS: 1 rule files found" in result.stdout
        assert "SUCCESS: 8 rules found" in result.stdout


#: A documented ``prometheus --config.file ...`` command, continuation lines joined.
_SERVER_COMMAND = re.compile(r"prometheus --config\.file(?:[^\n]*\\\n)*[^\n]*")


def _server_commands(text: str) -> list[str]:
    return [re.sub(r"\\\n\s*(#\s*)?", " ", found) for found in _SERVER_COMMAND.findall(text)]


class TestLoopbackOnly:
    """Prometheus's own default listens on every interface; the docs never do."""

    def test_every_documented_server_command_binds_loopback(self) -> None:
        """Each prometheus command in the docs and the config's header comment names
        --web.listen-address=127.0.0.1:<port>."""
        sources = [
            REPO / "README.md",
            REPO / "deploy" / "README.md",
            DEPLOY / "prometheus.yml",
            *sorted((REPO / "docs").glob("*.md")),
        ]
        found = {path.name: _server_commands(path.read_text()) for path in sources}
        commands = [command for listed in found.values() for command in listed]
        assert len(commands) >= 4, found
        for command in commands:
            assert re.search(r"--web\.listen-address=127\.0\.0\.1:\d+", command), command
