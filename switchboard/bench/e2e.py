"""``switchboard bench e2e``: being written (issue 3)."""

from __future__ import annotations

__all__ = ["run_e2e_bench"]


def run_e2e_bench(*, quick: bool, json_path: str | None) -> int:
    """Run the end-to-end benchmark; the exit status."""
    raise SystemExit("switchboard bench e2e: not yet")
