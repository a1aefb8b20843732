"""The built-in engine's token rows without its process: a real :class:`Scheduler` stepped
in a loop, each step's :func:`token_batch` split into one-request rows, as the detokenizer
router hands them to a detokenizer."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from router_core.wire.outputs import BatchTokenIDOutput
from router_core.wire.split import split_rows
from switchboard.engine import text_token_pool
from switchboard.engine.engine import token_batch
from switchboard.engine.scheduler import Scheduler, SchedulerConfig
from switchboard.engine.scheduler import Sequence as EngineSequence
from switchboard.text import Tokenizer

__all__ = ["OWNER", "EngineRun", "Generation", "engine_rows"]

OWNER = "ipc:///tmp/sb/worker-w0"
#: Steps a run may take at most (every generation here is far shorter).
MAX_STEPS = 10_000


@dataclass(frozen=True)
class Generation:
    """One request to the engine: its rid, prompt, length and stop strings."""

    rid: str
    prompt: str
    max_new_tokens: int
    stop: tuple[str, ...] = ()


@dataclass
class EngineRun:
    """Every row of a run, in order, and each request's whole output ids."""

    rows: list[BatchTokenIDOutput]
    output_ids: dict[str, list[int]]


def engine_rows(
    tokenizer: Tokenizer,
    generations: Sequence[Generation],
    *,
    max_running: int = 256,
    retract_before: Sequence[int] = (),
) -> EngineRun:
    """Run ``generations`` through the scheduler; before each step number in
    ``retract_before`` the engine pauses in ``retract`` mode and resumes at once."""
    pool = text_token_pool(tokenizer.vocab_size, tokenizer.decode, tokenizer.special_token_ids)
    config = SchedulerConfig(token_pool=pool, max_running_requests=max_running)
    scheduler = Scheduler(config, decode=tokenizer.decode)
    sequences = []
    for generation in generations:
        prompt = tokenizer.encode(generation.prompt, parse_special=False)
        sequence = EngineSequence(
            generation.rid,
            OWNER,
            prompt,
            max_new_tokens=generation.max_new_tokens,
            stop=generation.stop,
        )
        sequences.append(sequence)
        assert scheduler.admit(sequence)
    rows: list[BatchTokenIDOutput] = []
    for step in range(MAX_STEPS):
        if scheduler.next_step_at() is None:
            break
        if step in retract_before:
            assert not scheduler.pause("retract").rows
            scheduler.resume()
        result = scheduler.step(float(step))
        if result.rows:
            rows += split_batch(token_batch(result.rows))
    else:
        raise AssertionError(f"the engine did not finish in {MAX_STEPS} steps")
    return EngineRun(rows, {seq.rid: list(seq.output_ids) for seq in sequences})


def split_batch(batch: BatchTokenIDOutput) -> Iterator[BatchTokenIDOutput]:
    """``batch`` as one-request rows."""
    for row in split_rows(batch):
        yield BatchTokenIDOutput(**row)
