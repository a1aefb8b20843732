"""The HTTP limits' settings (``httpkit.limits``): bounds and the default error body."""

from __future__ import annotations

import json

import pytest

from httpkit.limits import DEFAULT_MAX_HEADER_BYTES, HttpLimits, json_error


class TestHttpLimits:
    """HttpLimits holds positive limits only."""

    def test_defaults(self) -> None:
        """The defaults are the documented ones."""
        limits = HttpLimits()
        assert (limits.max_header_bytes, limits.max_connections) == (DEFAULT_MAX_HEADER_BYTES, 1024)
        assert (limits.header_timeout_s, limits.body_timeout_s, limits.keep_alive_s) == (
            10.0,
            30.0,
            5.0,
        )

    @pytest.mark.parametrize(
        "given",
        [
            {"max_header_bytes": 0},
            {"max_connections": 0},
            {"header_timeout_s": 0.0},
            {"body_timeout_s": -1.0},
            {"keep_alive_s": float("nan")},
        ],
    )
    def test_a_limit_out_of_bounds_is_refused(self, given: dict[str, float]) -> None:
        """A zero, negative or NaN limit is a ValueError naming it."""
        with pytest.raises(ValueError, match=next(iter(given))):
            HttpLimits(**given)  # type: ignore[arg-type]


def test_json_error_is_the_admin_shape() -> None:
    """The default error body is {"error": {"code", "message"}}."""
    body = json.loads(json_error(431, "header_too_large", "too big"))
    assert body == {"error": {"code": "header_too_large", "message": "too big"}}
