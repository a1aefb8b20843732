"""engine-check's report (findings.py, report.py): order, table, JSON, exit status."""

from __future__ import annotations

import json

from switchboard.engine_check.findings import DUTIES, Finding, Status, failed, not_run, ok, ordered
from switchboard.engine_check.report import as_json, as_table, exit_status, summary
from switchboard.engine_check.runner import CHECKS


class TestFindings:
    """ordered puts one finding per duty in DUTIES order."""

    def test_missing_duties_not_run(self) -> None:
        """A duty with no finding is 'not run'; of two for one duty the first is kept."""
        findings = ordered([ok("restart"), ok("load.first", "a"), failed("load.first", "b", "c")])
        assert [finding.name for finding in findings] == list(DUTIES)
        assert findings[0].detail == "a"
        assert findings[1].status is Status.NOT_RUN

    def test_checks_cover_the_duties_in_order(self) -> None:
        """The runner's checks decide exactly DUTIES, in that order."""
        assert tuple(name for names, _ in CHECKS for name in names) == DUTIES


class TestReport:
    """The table, the JSON document and the exit status."""

    def findings(self) -> list[Finding]:
        """load.first ok, generate.rows failed, the rest not run."""
        return ordered(
            [ok("load.first", "fine"), failed("generate.rows", "row 2 late", "send only new ids")]
        )

    def test_exit_status(self) -> None:
        """1 with a FAIL, 0 when every duty that ran is ok, 1 when none ran."""
        assert exit_status(self.findings()) == 1
        assert exit_status(ordered([ok("load.first")])) == 0
        assert exit_status(ordered([])) == 1

    def test_table(self) -> None:
        """One line per duty, the fix on the line under a failure, the summary last."""
        lines = as_table(self.findings()).splitlines()
        assert lines[0].split() == ["duty", "result", "detail"]
        assert lines[1].split() == ["load.first", "ok", "fine"]
        assert lines[3].split()[:2] == ["generate.rows", "FAIL"]
        assert lines[4].strip() == "fix: send only new ids"
        assert lines[-1] == summary(self.findings()) == f"1 ok, 1 FAIL, {len(DUTIES) - 2} not run"
        assert len(lines) == 1 + len(DUTIES) + 1 + 1

    def test_json(self) -> None:
        """The same rows as objects, with the exit status."""
        document = json.loads(as_json(self.findings(), "cmd"))
        assert document["engine"] == "cmd" and document["exit_status"] == 1
        assert not document["ok"]
        assert document["duties"][2] == {
            "name": "generate.rows",
            "status": "FAIL",
            "detail": "row 2 late",
            "fix": "send only new ids",
        }
        assert document["duties"][1]["status"] == "not run"
        assert [duty["name"] for duty in document["duties"]] == list(DUTIES)

    def test_json_last_lines_only_on_failure(self) -> None:
        """The engine's last lines travel with a failing report, not with a passing one."""
        failing = json.loads(as_json(self.findings(), "cmd", "boom"))
        passing = json.loads(as_json(ordered([ok("load.first")]), "cmd", "fine"))
        assert (failing["last_lines"], passing["last_lines"]) == ("boom", "")

    def test_not_run_keeps_why(self) -> None:
        """A not-run row says why in its detail."""
        assert not_run("restart", "needs --engine-command").detail == "needs --engine-command"
