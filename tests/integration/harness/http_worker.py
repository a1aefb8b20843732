"""What the HTTP worker tests share: client limits and timeouts, request lengths, and the
module-scoped fixtures of one whole stack and of its predictions.

A test module uses the fixtures by importing them (and listing them in its ``__all__``);
each module gets its own stack, and two stacks may not be alive at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchboard.text import load_tokenizer
from tests.integration.harness.http_stack import HttpStack, http_stack
from tests.integration.harness.predictor import Predictor

__all__ = [
    "ENOUGH_CONNECTIONS",
    "FRESH",
    "HTTP_TIMEOUT",
    "lengths",
    "owned_stack",
    "predictor",
    "stack",
]

#: Generous: the machine has 2 cores shared with other suites.
HTTP_TIMEOUT = httpx.Timeout(60.0)
ENOUGH_CONNECTIONS = httpx.Limits(max_connections=400, max_keepalive_connections=400)
#: A fresh connection per request, so the kernel picks a worker for each.
FRESH = {"Connection": "close"}


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    """Predictions from the default tokenizer, the one every process of the stack loads."""
    return Predictor(load_tokenizer())


def owned_stack(
    request: pytest.FixtureRequest, switchboard_bin: str, log_dir: Path, **options: Any
) -> Iterator[HttpStack]:
    """A stack of ``options`` for a fixture to yield from; its logs are printed when a test
    using it failed."""
    with http_stack(switchboard_bin, log_dir, **options) as stack:
        failures = request.session.testsfailed
        yield stack
        if request.session.testsfailed > failures:
            print(stack.dump_logs())


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, switchboard_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpStack]:
    """The module's stack: 2 workers, 2 detokenizers sending text straight to workers."""
    yield from owned_stack(request, switchboard_bin, tmp_path_factory.mktemp("stack-logs"))


def lengths(count: int) -> list[int]:
    """``max_new_tokens`` of request ``i``: 8..24, varied."""
    return [8 + (i * 5) % 17 for i in range(count)]
