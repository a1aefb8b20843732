"""Whether the standard ``OTEL_*`` environment asks for trace export: pure, no SDK import."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["ROLES", "service_name", "traces_endpoint", "tracing_configured"]

#: The roles a process may name in ``setup`` (``service.name`` is ``switchboard-<role>``).
ROLES: Final = frozenset(
    {"worker", "tokenizer-router", "engine", "detokenizer-router", "detokenizer", "admin"}
)


def tracing_configured(environ: Mapping[str, str]) -> bool:
    """True iff traces are to be exported over OTLP.

    That is: ``OTEL_SDK_DISABLED`` is not ``true``, ``OTEL_TRACES_EXPORTER`` is unset,
    empty or ``otlp``, and ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (non-empty).
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter not in ("", "otlp"):
        return False
    return any(
        environ.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def service_name(role: str) -> str:
    """``switchboard-<role>``; ``ValueError`` for a role not in :data:`ROLES`."""
    if role not in ROLES:
        raise ValueError(f"unknown tracing role {role!r} (one of {sorted(ROLES)})")
    return f"switchboard-{role}"


def traces_endpoint(environ: Mapping[str, str]) -> str:
    """Where the OTLP/HTTP exporter posts traces, as the SDK resolves it:
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as it is, else ``OTEL_EXPORTER_OTLP_ENDPOINT``
    plus ``/v1/traces``, else the SDK's default ``http://localhost:4318/v1/traces``."""
    if traces := environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return traces
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"
