"""Fixtures for the model builder's tests (which need the ``llama`` extra's numpy and
gguf, not llama-cpp-python)."""

from __future__ import annotations

import pytest

from tests.unit.switchboard.models.small import CountingSource


@pytest.fixture
def source() -> CountingSource:
    """A fresh :class:`CountingSource` over :func:`small_vocabulary`."""
    return CountingSource()
