"""Tests for dashboards.build: the committed JSON equals what the code generates, and
``--check`` notices when it does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dashboards import JSON_DIR, REPO_ROOT
from dashboards.build import differences, main, write
from dashboards.render import render_all
from tests.unit.dashboards.committed import UIDS, all_models, load


class TestGeneration:
    def test_committed_json_matches_the_code(self) -> None:
        """Regenerating every dashboard from code reproduces the committed JSON byte for byte."""
        assert differences(JSON_DIR, render_all()) == []

    def test_check_flag_fails_on_stale_missing_or_extra_json(self, tmp_path: Path) -> None:
        """``--check`` exits 0 on fresh output and 1 once a file is edited, removed or added."""
        write(tmp_path, render_all())
        assert main(["--check", "--out", str(tmp_path)]) == 0
        edited = tmp_path / "switchboard-overview.json"
        edited.write_text(edited.read_text(encoding="utf-8").replace("Overview", "Overvue"))
        assert main(["--check", "--out", str(tmp_path)]) == 1
        write(tmp_path, render_all())
        (tmp_path / "switchboard-worker.json").unlink()
        assert main(["--check", "--out", str(tmp_path)]) == 1
        write(tmp_path, render_all())
        (tmp_path / "stray.json").write_text("{}")
        assert main(["--check", "--out", str(tmp_path)]) == 1

    def test_module_entry_point_checks_the_committed_json(self) -> None:
        """``python -m dashboards.build --check`` runs from the repository and passes."""
        result = subprocess.run(
            [sys.executable, "-m", "dashboards.build", "--check"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr

    def test_dashboards_have_stable_uids_and_unique_panel_ids(self) -> None:
        """Each dashboard keeps its uid, and panel ids are unique within it."""
        for uid in UIDS:
            model = load(uid)
            assert model["uid"] == uid
            ids = [panel["id"] for panel in model["panels"]]
            assert len(ids) == len(set(ids)), uid

    def test_sdk_quirks_are_fixed(self) -> None:
        """No ``"options": null`` panel, no placeholder variable ids, annotations have a list."""
        for model in all_models():
            for panel in model["panels"]:
                assert panel.get("options", {}) is not None, panel["title"]
            for variable in model["templating"]["list"]:
                assert "id" not in variable
                assert "auto" not in variable
            assert model["annotations"]["list"] == []
