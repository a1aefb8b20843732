"""Caps on what one HTTP request may ask of the stack, checked at the worker before any
engine request is sent.

Without them one request could cost every other client its latency: each stop string is
checked on every generated token (in the engine and in a detokenizer), each prompt, and
each of ``n`` samples, is an engine request of its own. :class:`RequestCaps` holds the
caps (``switchboard worker`` flags, and ``switchboard up`` settings); a request beyond
one is refused with :class:`CapExceeded`, a 400 naming the cap and its value.

Light on purpose (no FastAPI, no zmq): ``switchboard up`` reads its defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from router_core.settings_fields import flagged

__all__ = ["CapExceeded", "RequestCaps", "prompt_count"]


class CapExceeded(ValueError):
    """A request beyond one of the caps (answered with 400): ``cap`` is its setting's name,
    ``limit`` its value, ``param`` the top-level field the request is over it in."""

    def __init__(self, message: str, *, cap: str, limit: int, param: str | None) -> None:
        super().__init__(message)
        self.cap = cap
        self.limit = limit
        self.param = param


def prompt_count(source: str | Sequence[object]) -> int:
    """How many prompts ``source`` (a text, texts, token ids, or lists of token ids) is."""
    if isinstance(source, str) or (source and isinstance(source[0], int)):
        return 1
    return len(source)


@dataclass(frozen=True, kw_only=True)
class RequestCaps:
    """What one request may ask for at most. Each field is a ``switchboard worker`` flag.

    The defaults are measured, not guessed: a client sending requests at all of them at
    once, one after another (16 streamed generations of 1,024 prompt and 1,024 new tokens,
    or 16 prompts of 2,048 tokens, or 16 embeddings of 2,048, each generation with 16 stop
    strings of 64 characters and 256 stop ids), raises the median latency of other
    clients' short requests about 1.3x on the built-in engine
    (``tests/integration/test_worker_input_caps.py``). What costs everyone is generations
    times their stop strings (each stop string is searched on each token) and the tokens
    one request may queue ahead of the others: with 65,536 tokens the same client cost
    1.6x, with 32 generations and 16 stop strings of 128 characters over 2.5x.
    """

    #: Generations per request: the prompts of a batch, times ``n`` on ``/v1/completions``
    #: (every one is an engine request).
    max_prompts: int = flagged(
        16,
        help="generations one request may ask for: its prompts, times n on /v1/completions",
        bound="positive",
    )
    max_n: int = flagged(16, help="n (and best_of) of /v1/completions, at most", bound="positive")
    max_stop_strings: int = flagged(
        16, help="stop strings of one sampling_params, at most", bound="positive"
    )
    max_stop_chars: int = flagged(
        64, help="characters of one stop string, at most", bound="positive"
    )
    max_stop_token_ids: int = flagged(
        256, help="stop token ids of one sampling_params, at most", bound="positive"
    )
    #: Prompt tokens plus ``max_new_tokens``, summed over the request's generations (the
    #: work it may ask of the engine); each generation is also bounded by the context length.
    max_request_tokens: int = flagged(
        32_768,
        help="prompt tokens plus max new tokens, summed over one request's generations",
        bound="positive",
    )

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")

    def check_n(self, n: int) -> None:
        """Refuse ``n`` above ``max_n``."""
        if n > self.max_n:
            raise CapExceeded(
                f"n: {n} samples per prompt; at most {self.max_n} are accepted (max_n)",
                cap="max_n",
                limit=self.max_n,
                param="n",
            )

    def check_generations(self, prompts: int, *, param: str, n: int = 1) -> None:
        """Refuse ``prompts`` prompts (given in field ``param``) of ``n`` samples each when
        they make more than ``max_prompts`` generations."""
        generations = prompts * n
        if generations <= self.max_prompts:
            return
        asked = f"{prompts} prompts" if n == 1 else f"{prompts} prompts times n={n}"
        raise CapExceeded(
            f"{param}: {asked}; a request may ask for at most {self.max_prompts} "
            "generations (max_prompts): send the rest in more requests",
            cap="max_prompts",
            limit=self.max_prompts,
            param=param,
        )

    def check_stop(self, stop: Sequence[str], stop_token_ids: Sequence[int], *, at: str) -> None:
        """Refuse stop conditions beyond the caps; ``at`` is where they are in the body
        (``sampling_params``, ``sampling_params.2``, or empty for the top level)."""
        param = at.partition(".")[0] or "stop"
        prefix = f"{at}." if at else ""
        if len(stop) > self.max_stop_strings:
            raise CapExceeded(
                f"{prefix}stop: {len(stop)} stop strings; at most {self.max_stop_strings} "
                "are accepted (max_stop_strings)",
                cap="max_stop_strings",
                limit=self.max_stop_strings,
                param=param,
            )
        for index, text in enumerate(stop):
            if len(text) > self.max_stop_chars:
                raise CapExceeded(
                    f"{prefix}stop.{index}: a stop string of {len(text)} characters; at most "
                    f"{self.max_stop_chars} are accepted (max_stop_chars)",
                    cap="max_stop_chars",
                    limit=self.max_stop_chars,
                    param=param,
                )
        if len(stop_token_ids) > self.max_stop_token_ids:
            raise CapExceeded(
                f"{prefix}stop_token_ids: {len(stop_token_ids)} stop token ids; at most "
                f"{self.max_stop_token_ids} are accepted (max_stop_token_ids)",
                cap="max_stop_token_ids",
                limit=self.max_stop_token_ids,
                param=at.partition(".")[0] or "stop_token_ids",
            )

    def check_tokens(self, tokens: int, generations: int) -> None:
        """Refuse a request whose ``generations`` together ask for ``tokens`` tokens (prompt
        tokens plus new tokens) above ``max_request_tokens``."""
        if tokens <= self.max_request_tokens:
            return
        raise CapExceeded(
            f"the request asks for {tokens} tokens (prompt tokens plus max new tokens, summed "
            f"over its {generations} generations); at most {self.max_request_tokens} are "
            "accepted (max_request_tokens)",
            cap="max_request_tokens",
            limit=self.max_request_tokens,
            param=None,
        )
