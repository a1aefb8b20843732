"""How one HTTP worker runs."""

from __future__ import annotations

from dataclasses import dataclass

from router_core.worker_link import WorkerLinkSettings

__all__ = ["WorkerSettings"]


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    """One worker's identity, HTTP address, model facts and link."""

    worker_id: str
    link: WorkerLinkSettings
    host: str = "127.0.0.1"
    port: int = 8000
    #: The name clients pass as ``model`` and ``/v1/models`` lists.
    model_name: str = "switchboard-sim"
    #: Longest prompt plus output, in tokens; longer requests are refused with 400.
    context_length: int = 8192
    #: ``max_new_tokens`` when a request gives none (SGLang's default).
    default_max_new_tokens: int = 128
    #: Seconds a draining worker asks clients to wait (``Retry-After``).
    retry_after_s: int = 5
    #: Seconds ``/health_generate`` waits for its one-token generation.
    health_generate_timeout_s: float = 20.0
    #: Largest request body accepted, in bytes.
    max_body_bytes: int = 16 * 1024 * 1024
    version: str = ""

    def __post_init__(self) -> None:
        if self.context_length < 2:
            raise ValueError("context_length must be at least 2")
        if not 0 < self.default_max_new_tokens < self.context_length:
            raise ValueError("default_max_new_tokens must be in [1, context_length)")
        if self.retry_after_s < 0 or self.health_generate_timeout_s <= 0:
            raise ValueError("retry_after_s must be >= 0 and health_generate_timeout_s > 0")
