"""The fault suite's own judges, without a stack: a zero count means nothing was found,
not that nothing could be.

The classifier tells every outcome apart, the fuzz generator only draws messages the
stack's validation refuses (each with that validation's reason), a child's command line
names its role, and a request plan's prompts never share an output.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from tests.fault.harness.classify import Observed, Outcome, classify
from tests.fault.harness.expected import RequestPlan, predictor
from tests.fault.harness.fuzz import attack, control_reason, data_reason
from tests.fault.harness.fuzz_targets import stack_targets
from tests.fault.harness.procfs import role_name

TEXT = " predicted text"


def finished(**changes: object) -> Observed:
    """A stream that ended as the prediction says, with ``changes``."""
    seen = Observed(
        status=200,
        text=TEXT,
        finish={"type": "length", "length": 4},
        completion_tokens=4,
        events=3,
        done=True,
    )
    for name, value in changes.items():
        setattr(seen, name, value)
    return seen


class TestClassify:
    def test_exact_is_ok(self) -> None:
        """The predicted text, finished by length, [DONE]: ok."""
        assert classify(finished(), TEXT, 4).outcome is Outcome.OK

    @pytest.mark.parametrize(
        "changes",
        [
            {"text": " other text"},
            {"text": TEXT[:-2]},
            {"done": False},
            {"completion_tokens": 3},
            {"finish": {"type": "stop", "matched": 2}},
            {"finish": None},
            {"malformed": ["event: nonsense"]},
        ],
        ids=["other", "cut", "no-done", "tokens", "stop", "no-finish", "malformed"],
    )
    def test_silent_difference_is_wrong_text(self, changes: dict[str, object]) -> None:
        """Any difference a client would take for success is a wrong text."""
        verdict = classify(finished(**changes), TEXT, 4)
        assert verdict.outcome is Outcome.WRONG_TEXT, verdict

    @pytest.mark.parametrize(
        ("changes", "cause"),
        [
            ({"status": 503, "error": "draining"}, "status 503: draining"),
            ({"error": "rows were lost"}, "error event: rows were lost"),
            ({"finish": {"type": "abort", "message": "engine restarted"}}, "abort: engine"),
            ({"finish": "abort"}, "abort"),
            ({"broken": "ReadError: reset", "done": False}, "connection: ReadError"),
        ],
        ids=["status", "event", "abort", "openai-abort", "broken"],
    )
    def test_visible_failure_is_a_clear_error(self, changes: dict[str, object], cause: str) -> None:
        """A failure the client sees is a clear error, with its cause."""
        verdict = classify(finished(**changes), TEXT, 4)
        assert verdict.outcome is Outcome.CLEAR_ERROR
        assert verdict.cause.startswith(cause)

    def test_no_end_is_hung(self) -> None:
        """A request cut at the bound is hung, whatever it had seen."""
        assert classify(finished(timed_out=True), TEXT, 4).outcome is Outcome.HUNG


class TestFuzz:
    def test_every_message_is_refused_for_its_reason(self) -> None:
        """For every target, each drawn message fails the stack's own checks with the
        reason given (extras: past them), and every kind of draw occurs."""
        targets = stack_targets(Path("/tmp/sb-unit"), ["w0", "w1"], 2)
        assert len(targets) == 12
        for target in targets:
            drawn = attack(target, random.Random(7))
            reasons: Counter[str] = Counter()
            for _ in range(400):
                frames, reason = next(drawn)
                checked = (
                    control_reason(frames)
                    if target.control
                    else data_reason(frames, target.frame_count)
                )
                extra = any(frames == known for known, _ in target.extras)
                assert checked == reason or (checked is None and extra), (target.name, reason)
                reasons[reason] += 1
            assert len(reasons) >= 3, (target.name, reasons)


class TestRoles:
    @pytest.mark.parametrize(
        ("argv", "role"),
        [
            (["py", "-m", "switchboard.cli", "router", "--run-dir", "/r"], "router"),
            (["py", "-m", "switchboard.cli", "detokenizer", "--index", "1"], "detokenizer-1"),
            (["py", "-m", "switchboard.cli", "worker", "--worker-id", "w3"], "worker-w3"),
            (["py", "-m", "switchboard.cli", "up"], None),
            (["bash"], None),
        ],
    )
    def test_role_from_command_line(self, argv: list[str], role: str | None) -> None:
        """The supervisor's child names, read from a command line."""
        assert role_name(argv) == role


class TestPlan:
    def test_no_two_requests_share_an_output(self) -> None:
        """Prompt id sums differ modulo the pool, so texts differ; lengths in range."""
        plan = RequestPlan.build("unit", size=200)
        rule = predictor()
        sums = {sum(rule.prompt_ids(s.prompt)) % len(rule.pool) for s in plan.specs}
        assert len(sums) == 200
        assert len({spec.text for spec in plan.specs}) == 200
        assert {spec.endpoint for spec in plan.specs} == {"generate", "completions"}
        assert all(16 <= spec.max_tokens <= 96 for spec in plan.specs)
