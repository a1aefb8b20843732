"""The stack's layout: which children, in which order, with which arguments and sockets.

Pure: it only turns settings, a run directory and the supervisor's pid into
:class:`ChildSpec` values, so it is tested without starting anything.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Mapping
from pathlib import Path

from router_core.credentials import KEY_FILE
from router_core.endpoints import (
    DETOK_ROUTER_STATE_FILE,
    ROUTER_STATE_FILE,
    DetokenizerRouterEndpoints,
    EngineEndpoints,
    RouterEndpoints,
    check_endpoint,
    worker_address,
)
from switchboard.supervisor.children import ChildSpec, ReadyCheck, Role
from switchboard.supervisor.engine_command import (
    VOCAB_FILE,
    EnginePlaces,
    engine_argv,
    engine_environment,
    exec_argv,
)
from switchboard.supervisor.engine_settings import (
    engine_flags,
    served_model_name,
    served_tokenizer,
)
from switchboard.supervisor.gateway_settings import gateway_flags
from switchboard.supervisor.http_limits import http_limit_flags
from switchboard.supervisor.metrics_dir import MULTIPROC_ENV
from switchboard.supervisor.request_caps import request_cap_flags
from switchboard.supervisor.settings import ENV_PREFIX, FOREIGN_ENV, StackSettings
from switchboard.worker.settings import WorkerSettings

__all__ = [
    "OTLP_ENDPOINT_ENV",
    "ROLE_ORDER",
    "START_GROUPS",
    "admin_url",
    "child_environment",
    "http_url",
    "stack_layout",
    "worker_ids",
]

#: Stopping goes the other way: the admin app first, the router last.
ROLE_ORDER: tuple[Role, ...] = (
    "router",
    "gateway",
    "detok-router",
    "detokenizer",
    "engine",
    "worker",
    "admin",
)
#: Start order: each group once the one before it is ready. The admin app needs only the
#: router and starts alongside the detokenizer router.
START_GROUPS: tuple[tuple[Role, ...], ...] = (
    ("router",),
    ("detok-router", "admin", "gateway"),
    ("detokenizer",),
    ("engine",),
    ("worker",),
)


def worker_ids(count: int) -> list[str]:
    """``w0`` .. ``w{count-1}``."""
    return [f"w{index}" for index in range(count)]


def _ipc_file(endpoint: str) -> Path:
    return Path(check_endpoint(endpoint).removeprefix("ipc://"))


def _switchboard(*arguments: str) -> tuple[str, ...]:
    # This interpreter, so the children run in the same virtual environment.
    return (sys.executable, "-m", "switchboard.cli", *arguments)


def http_url(host: str, port: int) -> str:
    """``http://host:port``, bracketing an IPv6 address; a wildcard host becomes loopback."""
    bare = host.strip("[]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return f"http://{bare}:{port}"
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    text = f"[{address}]" if address.version == 6 else str(address)
    return f"http://{text}:{port}"


def admin_url(settings: StackSettings) -> str:
    """Where the admin app serves, e.g. ``http://127.0.0.1:8001`` (loopback for a wildcard)."""
    return http_url(settings.host, settings.admin_port)


def _engine_spec(
    settings: StackSettings,
    run_dir: Path,
    parent_pid: int,
    common: tuple[str, ...],
    key: str | None,
) -> ChildSpec:
    """The engine child: the built-in one, or the user's ``engine_command`` started
    through :mod:`~switchboard.supervisor.engine_exec` (it dies with us) with the
    placeholders replaced and the ``SWITCHBOARD_ENGINE_*`` variables set."""
    endpoints = EngineEndpoints.in_run_dir(run_dir)
    socket_files = (_ipc_file(endpoints.inbound),)
    if settings.engine != "command" or settings.engine_command is None:
        argv = _switchboard("engine", *common, "--outputs-via", "direct", *engine_flags(settings))
        return ChildSpec(
            name="engine",
            role="engine",
            argv=argv,
            ready=ReadyCheck("engine"),
            socket_files=socket_files,
        )
    places = EnginePlaces(
        endpoints=endpoints,
        run_dir=run_dir,
        key_file=run_dir / KEY_FILE,
        vocab_file=run_dir / VOCAB_FILE,
        parent_pid=parent_pid,
    )
    return ChildSpec(
        name="engine",
        role="engine",
        argv=exec_argv(parent_pid, engine_argv(settings.engine_command, places)),
        ready=ReadyCheck("engine"),
        socket_files=socket_files,
        state_files=(places.vocab_file,),
        env={**(settings.engine_env or {}), **engine_environment(places, key)},
        cwd=settings.engine_cwd,
        command=settings.engine_command,
    )


def stack_layout(
    settings: StackSettings,
    run_dir: Path,
    parent_pid: int,
    admin_env: Mapping[str, str] | None = None,
    key: str | None = None,
) -> list[ChildSpec]:
    """Every child of the stack, in start order (:data:`START_GROUPS`).

    ``admin_env`` is added to the admin app's environment: its token lists. ``key`` is
    the stack key, which an engine command gets in its environment.
    """
    common: tuple[str, ...] = ("--run-dir", str(run_dir), "--parent-pid", str(parent_pid))
    common += ("--log-level", settings.log_level)
    served = served_tokenizer(settings)
    tokenizer = ("--tokenizer", str(served)) if served else ()
    template = settings.chat_template
    chat_template = ("--chat-template", str(template)) if template else ()
    router = RouterEndpoints.in_run_dir(run_dir)
    detok = DetokenizerRouterEndpoints.in_run_dir(run_dir, settings.detokenizers)
    count = str(settings.detokenizers)

    specs = [
        ChildSpec(
            name="router",
            role="router",
            argv=_switchboard("router", *common),
            ready=ReadyCheck("control", router.control),
            state_files=(run_dir / ROUTER_STATE_FILE,),
            socket_files=tuple(
                _ipc_file(endpoint)
                for endpoint in (
                    router.requests,
                    router.workers,
                    router.engine_events,
                    router.outputs,
                    router.control,
                )
            ),
        ),
        ChildSpec(
            name="detok-router",
            role="detok-router",
            argv=_switchboard("detok-router", *common, "--detokenizers", count),
            ready=ReadyCheck("control", detok.control),
            state_files=(run_dir / DETOK_ROUTER_STATE_FILE,),
            socket_files=(_ipc_file(detok.inbound), _ipc_file(detok.control)),
        ),
    ]
    if settings.gateway_listen is not None:
        specs.append(
            ChildSpec(
                name="gateway",
                role="gateway",
                argv=_switchboard(
                    "gateway", *common, *gateway_flags(settings, allow_remote=settings.allow_remote)
                ),
                ready=ReadyCheck("tcp", settings.gateway_listen),
            )
        )
    for index, endpoint in enumerate(detok.detokenizers):
        argv = _switchboard(
            "detokenizer",
            *common,
            *("--index", str(index), "--count", count),
            *("--outputs-via", settings.outputs_via),
            *tokenizer,
        )
        specs.append(
            ChildSpec(
                name=f"detokenizer-{index}",
                role="detokenizer",
                argv=argv,
                ready=ReadyCheck("socket", str(_ipc_file(endpoint))),
                socket_files=(_ipc_file(endpoint),),
            )
        )
    specs.append(_engine_spec(settings, run_dir, parent_pid, common, key))
    remote = ("--allow-remote",) if settings.allow_remote else ()
    model_name = served_model_name(settings, settings.model_name, WorkerSettings.model_name)
    for worker_id in worker_ids(settings.workers):
        argv = _switchboard(
            "worker",
            *common,
            *("--worker-id", worker_id, "--host", settings.host, "--port", str(settings.port)),
            *("--model-name", model_name),
            *("--graceful-timeout-s", repr(settings.graceful_timeout_s)),
            *("--idle-timeout-s", repr(settings.idle_timeout_s)),
            *("--pause-wait-s", repr(settings.pause_wait_s)),
            *("--upstream-grace-s", repr(settings.upstream_grace_s)),
            *("--admin-url", admin_url(settings)),
            *http_limit_flags(settings, admin=False),
            *request_cap_flags(settings),
            *tokenizer,
            *chat_template,
            *remote,
        )
        specs.append(
            ChildSpec(
                name=f"worker-{worker_id}",
                role="worker",
                argv=argv,
                ready=ReadyCheck("worker", worker_id),
                socket_files=(_ipc_file(worker_address(run_dir, worker_id)),),
                worker_id=worker_id,
            )
        )
    audit = (
        () if settings.admin_audit_log is None else ("--audit-log", str(settings.admin_audit_log))
    )
    specs.append(
        ChildSpec(
            name="admin",
            role="admin",
            argv=_switchboard(
                "admin",
                *common,
                *("--host", settings.host, "--port", str(settings.admin_port)),
                *("--detok-control-endpoint", detok.control),
                *http_limit_flags(settings, admin=True),
                *audit,
                *remote,
            ),
            ready=ReadyCheck("http", f"{admin_url(settings)}/healthz"),
            env=dict(admin_env or {}),
        )
    )
    return specs


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
