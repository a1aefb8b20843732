"""The llama.cpp engine's step planner: which tokens of which requests one step feeds."""

from __future__ import annotations

from switchboard.engine.llama_cpp.planner import Slot, fits, plan_step
from switchboard.engine.sequences import Sequence


def slot(rid: str, prompt: int, output: int = 0, fed: int = 0, seq_id: int = 0) -> Slot:
    request = Sequence(rid, "w0", list(range(1, prompt + 1)))
    request.output_ids = list(range(100, 100 + output))
    return Slot(request, seq_id, fed)


class TestSlot:
    def test_pending_counts_unfed_prompt_and_output(self) -> None:
        """pending is prompt plus output minus what the KV cache holds."""
        assert slot("a", 5).pending == 5
        assert slot("a", 5, output=3, fed=7).pending == 1

    def test_tokens_span_prompt_then_output(self) -> None:
        """tokens(start, stop) reads prompt-then-output across the boundary."""
        one = slot("a", 3, output=2)
        assert one.tokens(0, 5) == [1, 2, 3, 100, 101]
        assert one.tokens(2, 4) == [3, 100]
        assert one.tokens(4, 5) == [101]
        assert one.tokens(0, 2) == [1, 2]


class TestPlanStep:
    def test_decoding_requests_take_one_token_each_first(self) -> None:
        """Every decoding request feeds its newest token before any prefill chunk."""
        decoding = [slot("d0", 4, output=1, fed=4), slot("d1", 2, output=3, fed=4)]
        prefill = slot("p", 10)
        chunks = plan_step([prefill, *decoding], budget=6)
        assert [(c.slot.request.rid, c.start, c.stop) for c in chunks] == [
            ("d0", 4, 5),
            ("d1", 4, 5),
            ("p", 0, 4),
        ]
        assert [c.samples for c in chunks] == [True, True, False]

    def test_prefill_is_chunked_across_steps_and_samples_at_its_end(self) -> None:
        """A prompt longer than the budget is fed in chunks; the last chunk samples."""
        long = slot("p", 10)
        first = plan_step([long], budget=4)
        assert [(c.start, c.stop, c.samples) for c in first] == [(0, 4, False)]
        long.fed = 8
        last = plan_step([long], budget=4)
        assert [(c.start, c.stop, c.samples) for c in last] == [(8, 10, True)]

    def test_prefills_share_what_is_left_in_admission_order(self) -> None:
        """Prompt chunks go to the oldest admitted requests first, within the budget."""
        chunks = plan_step([slot("a", 3), slot("b", 5), slot("c", 2)], budget=6)
        assert [(c.slot.request.rid, len(c)) for c in chunks] == [("a", 3), ("b", 3)]

    def test_a_retracted_request_refeeds_prompt_and_output(self) -> None:
        """A request whose cells were freed (fed 0) feeds prompt and output again."""
        back = slot("r", 3, output=4, fed=0)
        chunks = plan_step([back], budget=16)
        assert [(c.start, c.stop, c.samples) for c in chunks] == [(0, 7, True)]


class TestFits:
    def test_room_counts_every_running_requests_next_token(self) -> None:
        """A request fits when all held tokens, one more each, and its prefill fit."""
        running = [slot("a", 10, output=2, fed=11)]  # holds 12 tokens, needs 13 next step
        assert fits(running, 6, cells=20)
        assert not fits(running, 7, cells=20)
        assert fits([], 19, cells=20)
        assert not fits([], 20, cells=20)
