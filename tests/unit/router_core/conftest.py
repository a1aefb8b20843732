"""Fixtures shared by the router_core unit tests: the C fast path (loaded once per module,
skipped locally and failed under ``CI=true`` when it is not built), and tracing into an
in-memory exporter."""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router_core import fastpath, tracing
from router_core.wire import DATA_KINDS
from tests.conftest import running_in_ci


def unavailable(reason: str) -> None:
    """Skip locally; fail under CI, where a missing extension is a broken build."""
    if running_in_ci():
        pytest.fail(f"CI=true: the C fast path must be tested: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def extension() -> ModuleType:
    """The compiled ``router_core._fastpath`` module."""
    try:
        from router_core import _fastpath  # type: ignore[attr-defined]
    except ImportError as exc:
        unavailable(f"router_core._fastpath is not built ({exc}); run pip install -e .")
    return _fastpath  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def fast(extension: ModuleType) -> fastpath.FastForwarder:
    """The forwarder for the data kinds, wired to pyzmq's libzmq."""
    with pytest.MonkeyPatch.context() as patch:
        # Test the extension even where the environment turns it off; forget any cached
        # decision so load() really looks.
        patch.delenv("SWITCHBOARD_NO_FASTPATH", raising=False)
        patch.setattr(fastpath, "_native_checked", False, raising=False)
        patch.setattr(fastpath, "_native", None, raising=False)
        forwarder = fastpath.load(DATA_KINDS)
    if forwarder is None:
        unavailable("fastpath.load() returned None (libzmq not found in this process)")
    assert forwarder is not None
    return forwarder


@pytest.fixture
def no_tracing_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No OTEL_* variable from the caller's shell, and tracing shut down after each test
    (the tracing tests use it for every test: ``pytestmark = usefixtures(...)``)."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    yield
    tracing.shutdown()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Tracing on for this test (role ``worker``), every span exported here at once."""
    memory = InMemorySpanExporter()
    assert tracing.setup("worker", "worker-w0", span_exporter=memory)
    return memory
