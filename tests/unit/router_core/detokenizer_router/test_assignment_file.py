"""The detokenizer router's saved assignment: a restart routes each worker where it
went before, so requests in flight stay with the detokenizer that holds their state."""

from __future__ import annotations

from pathlib import Path

from router_core.detokenizer_router.assignment_file import AssignmentFile
from router_core.detokenizer_router.picker import DetokenizerPicker
from router_core.detokenizer_router.router import DetokenizerRouter
from router_core.detokenizer_router.settings import DetokenizerRouterSettings
from router_core.endpoints import DetokenizerRouterEndpoints


class TestPickerRestore:
    def test_a_restored_picker_routes_as_before_and_balances_the_rest(self) -> None:
        """Workers seen in the order w1, w0 by the first picker; the second, given its
        assignment, sends them to the same places and a new worker to the emptier one."""
        first = DetokenizerPicker(3)
        for owner in ("w1", "w0"):
            first.pick("r", owner)
        assert first.take_changed() and not first.take_changed()
        second = DetokenizerPicker(3, assigned=first.assignments())
        assert not second.changed
        assert second.pick("r", "w1") == first.pick("r", "w1") == 0
        assert second.pick("r", "w0") == first.pick("r", "w0") == 1
        assert second.pick("r", "w2") == 2 and second.take_changed()

    def test_indices_out_of_range_are_ignored(self) -> None:
        picker = DetokenizerPicker(2, assigned={"a": 1, "b": 7, "c": -1})
        assert picker.assignments() == {"a": 1}


class TestAssignmentFile:
    def test_save_then_load(self, tmp_path: Path) -> None:
        file = AssignmentFile(tmp_path / "detok-router-state.json", detokenizers=2)
        file.save({"ipc:///w0": 1, "ipc:///w1": 0})
        assert file.load() == {"ipc:///w0": 1, "ipc:///w1": 0}

    def test_another_detokenizer_count_is_not_used(self, tmp_path: Path) -> None:
        AssignmentFile(tmp_path / "s.json", detokenizers=2).save({"w0": 1})
        assert AssignmentFile(tmp_path / "s.json", detokenizers=3).load() == {}

    def test_unreadable_or_absent_is_empty(self, tmp_path: Path) -> None:
        assert AssignmentFile(tmp_path / "absent.json", 2).load() == {}
        (tmp_path / "bad.json").write_text("{")
        assert AssignmentFile(tmp_path / "bad.json", 2).load() == {}

    def test_a_router_built_with_the_file_starts_from_it(self, tmp_path: Path) -> None:
        """No sockets: the router's picker is restored when it is made."""
        path = tmp_path / "detok-router-state.json"
        AssignmentFile(path, 2).save({"ipc:///w0": 1})
        endpoints = DetokenizerRouterEndpoints.in_run_dir(tmp_path, 2)
        router = DetokenizerRouter(
            DetokenizerRouterSettings(endpoints=endpoints, state_file=str(path))
        )
        assert router.picker.assignments() == {"ipc:///w0": 1}
