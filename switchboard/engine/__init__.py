"""The built-in engine: a simulated continuous-batching scheduler on the engine link.

:mod:`~switchboard.engine.scheduler` is the pure scheduling logic (no sockets, time
passed in); :mod:`~switchboard.engine.tokens` the deterministic token and embedding
rules; :mod:`~switchboard.engine.engine` the process loop, which uses only
``router_core.engine_link``.
"""

from switchboard.engine.scheduler import (
    FinishReason,
    Scheduler,
    SchedulerConfig,
    Sequence,
    StepResult,
    StepRow,
)
from switchboard.engine.tokens import embedding_for, generated_token, text_token_pool

__all__ = [
    "FinishReason",
    "Scheduler",
    "SchedulerConfig",
    "Sequence",
    "StepResult",
    "StepRow",
    "embedding_for",
    "generated_token",
    "text_token_pool",
]
