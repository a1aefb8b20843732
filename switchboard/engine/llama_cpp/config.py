"""The llama.cpp engine's settings: the model, its context, batch, sequences and threads.

Flagged fields are ``switchboard engine --backend llama-cpp`` flags (and ``switchboard up
--engine llama-cpp`` settings); the names follow llama.cpp's own server (``-c``, ``-b``,
``-np``, ``-t``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from router_core.settings_fields import flagged

__all__ = ["MAX_SEQUENCES", "LlamaConfig", "default_threads"]

#: llama.cpp's ``LLAMA_MAX_SEQ``: the most sequences one context holds.
MAX_SEQUENCES = 256


def default_threads() -> int:
    """One thread fewer than the CPUs this process may run on (at least 1).

    ggml's threads meet at a spinning barrier after every operation of a step, so a step
    runs at the pace of its most delayed thread: with a thread on every CPU, each time a
    worker or detokenizer of the stack takes a CPU, one thread is descheduled and the
    others spin until it runs again. Measured on 2 CPUs with the tiny test model, 2
    threads took 3 s for a 16-token request through the stack, 1 thread 0.02 s.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


@dataclass(frozen=True)
class LlamaConfig:
    """How the model runs: its KV cache, batches and threads."""

    context_size: int = flagged(
        4096,
        help="KV cache cells shared by every running request: the most tokens in flight at "
        "once, and the most one request may hold (rounded up to a multiple of 256)",
        bound="positive",
    )
    batch_size: int = flagged(
        512,
        help="tokens one step feeds the model at most: one per decoding request plus "
        "prompt chunks of admitted ones",
        bound="positive",
    )
    sequences: int = flagged(
        32,
        help=f"requests decoded together at most (each its own KV sequence; at most "
        f"{MAX_SEQUENCES})",
        bound="positive",
    )
    threads: int = flagged(
        0,
        help="CPU threads for each step (0: one fewer than the CPUs this process may use, "
        "leaving one to the stack's other processes)",
    )
    max_waiting_requests: int = 65_536

    def __post_init__(self) -> None:
        if not 1 <= self.sequences <= MAX_SEQUENCES:
            raise ValueError(f"sequences must be in [1, {MAX_SEQUENCES}], not {self.sequences}")
        if self.batch_size < self.sequences:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be at least sequences "
                f"({self.sequences}): every decoding request feeds one token per step"
            )
        if self.context_size < 2:
            raise ValueError("context_size must be at least 2")
        if self.threads < 0:
            raise ValueError("threads must be >= 0")
        if self.max_waiting_requests <= 0:
            raise ValueError("max_waiting_requests must be > 0")

    @property
    def effective_threads(self) -> int:
        """``threads``, or :func:`default_threads` when it is 0."""
        return self.threads or default_threads()
