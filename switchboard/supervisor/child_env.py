"""The children's environment: the supervisor's, minus the stack's own settings."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from switchboard.supervisor.metrics_dir import MULTIPROC_ENV
from switchboard.supervisor.settings import ENV_PREFIX, FOREIGN_ENV

__all__ = ["OPERATOR_ENV", "OTLP_ENDPOINT_ENV", "child_environment"]


#: The operator CLI's variables: accepted by ``up``, never handed to a child (no child
#: needs an operator's token in its environment).
OPERATOR_ENV = frozenset({"SWITCHBOARD_ADMIN_URL", "SWITCHBOARD_ADMIN_TOKEN"})


#: Where ``otlp_endpoint`` goes: the OpenTelemetry SDK's standard variable.
OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"


def child_environment(
    environ: Mapping[str, str],
    *,
    metrics_dir: Path | None = None,
    otlp_endpoint: str | None = None,
) -> dict[str, str]:
    """The children's environment: ours, minus the stack's own settings variables.

    The children get every setting as a flag; a ``SWITCHBOARD_PORT`` left in their
    environment could only be misread by a child's own settings. Output is unbuffered
    so the children's log lines interleave with the supervisor's as they happen.
    ``PROMETHEUS_MULTIPROC_DIR`` is ``metrics_dir``, or absent (metrics off) whatever
    ours says; ``otlp_endpoint`` becomes ``OTEL_EXPORTER_OTLP_ENDPOINT``. Every other
    ``OTEL_*`` variable (sampler, headers, ...) passes through as it is.
    """
    env = {
        name: value
        for name, value in environ.items()
        if not name.upper().startswith(ENV_PREFIX)
        or (name.upper() in FOREIGN_ENV and name.upper() not in OPERATOR_ENV)
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.pop(MULTIPROC_ENV, None)
    if metrics_dir is not None:
        env[MULTIPROC_ENV] = str(metrics_dir)
    if otlp_endpoint is not None:
        env[OTLP_ENDPOINT_ENV] = otlp_endpoint
    return env
