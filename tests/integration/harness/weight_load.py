"""A streaming load for live weight updates, and what the built-in engine's token rule
says each of its texts must be: :class:`Load` runs clients streaming generations on a
thread; :func:`explains` checks one finished generation against the chain of versions
loaded (its tokens are the previous version's, then its own last version's)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from dataclasses import dataclass
from typing import Any

import httpx

from switchboard.engine.tokens import version_seed
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import SseStream, generate_stream

__all__ = ["CLIENTS", "TOKENS", "Done", "Load", "explains", "predictor"]

#: Tokens per generation: 0.12 s of 10 ms steps, well inside the gap between two swaps.
TOKENS = 12
CLIENTS = 6


@dataclass
class Done:
    """One finished streamed generation."""

    prompt: str
    stream: SseStream

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.stream.events[-1].get("meta_info", {}))

    @property
    def error(self) -> str | None:
        """The stream's error message, when it ended with one instead of its text."""
        last = self.stream.events[-1] if self.stream.events else {"error": {"message": "none"}}
        error = last.get("error")
        return None if error is None else str(error.get("message", error))


class Load:
    """``CLIENTS`` clients streaming generations on a thread until :meth:`stop`."""

    def __init__(self, base_url: str, stem: str) -> None:
        self.base_url = base_url
        self.stem = stem
        self.done: list[Done] = []
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._numbers = itertools.count()

    async def _client(self, http: httpx.AsyncClient) -> None:
        while not self._stop.is_set():
            prompt = f"{self.stem} request {next(self._numbers)}"
            body = {
                "text": prompt,
                "sampling_params": {"max_new_tokens": TOKENS, "ignore_eos": True},
                "stream": True,
            }
            seen = SseStream()
            try:
                await generate_stream(http, body, into=seen)
            except Exception as exc:  # reported by the test
                self.failures.append(exc)
                return
            self.done.append(Done(prompt, seen))

    async def _run(self) -> None:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=60, trust_env=False) as http:
            await asyncio.gather(*(self._client(http) for _ in range(CLIENTS)))

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the load did not stop within 60 s"


def predictor(tokenizer: Any, version: str) -> Predictor:
    return Predictor(tokenizer, seed=version_seed(0, "" if version == "default" else version))


def explains(tokenizer: Any, done: Done, chain: list[str]) -> str | None:
    """Why ``done`` is not a text the versions of ``chain`` make, or None if it is:
    its tokens are those of the version before its last one, then its last one's."""
    if done.error is not None:
        return None if done.error.strip() else f"{done.prompt}: an error without a message"
    meta = done.meta
    version, count = meta["weight_version"], int(meta["completion_tokens"])
    if version not in chain:
        return f"{done.prompt}: version {version!r} was never loaded ({chain})"
    new = predictor(tokenizer, version).token_ids(done.prompt, count)
    index = chain.index(version)
    old = predictor(tokenizer, chain[index - 1]).token_ids(done.prompt, count) if index else new
    texts = {tokenizer.decode(old[:split] + new[split:]) for split in range(count + 1)}
    if done.stream.text not in texts:
        return f"{done.prompt}: {done.stream.text!r} is no mix of {chain[index - 1 : index + 1]}"
    if meta["finish_reason"]["type"] == "abort" and done.stream.text != tokenizer.decode(new):
        return f"{done.prompt}: an aborted request's tokens are not all {version}'s"
    return None
