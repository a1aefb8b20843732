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
from switchboard.supervisor.child_env import OTLP_ENDPOINT_ENV, child_environment
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
from switchboard.supervisor.gateway_settings import gateway_flags, worker_id_prefix
from switchboard.supervisor.http_limits import http_limit_flags
from switchboard.supervisor.request_caps import request_cap_flags
from switchboard.supervisor.settings import StackSettings
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


def worker_ids(count: int, prefix: str = "w") -> list[str]:
    """``w0`` .. ``w{count-1}`` (``prefix`` instead of ``w``)."""
    return [f"{prefix}{index}" for index in range(count)]


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
    *,
    key: str | None = None,
    listen_fd: int | None = None,
) -> list[ChildSpec]:
    """Every child of the stack, in start order (:data:`START_GROUPS`).

    ``admin_env`` is added to the admin app's environment: its token lists. ``key`` is
    the stack key, which an engine command gets in its environment. ``listen_fd`` is the
    workers' shared listening socket, which each inherits (None: each binds its own).
    Role ``control`` has no HTTP workers; role ``workers`` has nothing else.
    """
    common: tuple[str, ...] = ("--run-dir", str(run_dir), "--parent-pid", str(parent_pid))
    common += ("--log-level", settings.log_level)
    if settings.role == "workers":
        return _worker_specs(settings, run_dir, common, listen_fd)
    served = served_tokenizer(settings)
    tokenizer = ("--tokenizer", str(served)) if served else ()
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
    if settings.role != "control":
        specs += _worker_specs(settings, run_dir, common, listen_fd)
    specs.append(_admin_spec(settings, detok, common, admin_env))
    return specs


def _admin_spec(
    settings: StackSettings,
    detok: DetokenizerRouterEndpoints,
    common: tuple[str, ...],
    admin_env: Mapping[str, str] | None,
) -> ChildSpec:
    remote = ("--allow-remote",) if settings.allow_remote else ()
    audit = (
        () if settings.admin_audit_log is None else ("--audit-log", str(settings.admin_audit_log))
    )
    return ChildSpec(
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


def _worker_specs(
    settings: StackSettings, run_dir: Path, common: tuple[str, ...], listen_fd: int | None
) -> list[ChildSpec]:
    """The HTTP workers: on this host's router, or (role workers) behind the control
    host's gateway, where each is ready once it answers ``/health`` itself; each serves
    on the inherited ``listen_fd`` when there is one."""
    served = served_tokenizer(settings)
    template = settings.chat_template
    remote = ("--allow-remote",) if settings.allow_remote else ()
    model_name = served_model_name(settings, settings.model_name, WorkerSettings.model_name)
    on_worker_host = settings.role == "workers"
    if on_worker_host:
        assert settings.control is not None  # the settings require it for role workers
        link: tuple[str, ...] = (
            *("--gateway", settings.control),
            *("--curve-key-pair", str(settings.curve_key_pair)),
            *("--gateway-public-key", str(settings.gateway_public_key)),
            *("--key-file", str(run_dir / KEY_FILE)),
        )
        admin = settings.control_admin_url or ""
    else:
        link, admin = (), admin_url(settings)
    specs = []
    for worker_id in worker_ids(settings.workers, worker_id_prefix(settings)):
        argv = _switchboard(
            "worker",
            *common,
            *("--worker-id", worker_id, "--host", settings.host, "--port", str(settings.port)),
            *("--model-name", model_name),
            *("--graceful-timeout-s", repr(settings.graceful_timeout_s)),
            *("--idle-timeout-s", repr(settings.idle_timeout_s)),
            *("--pause-wait-s", repr(settings.pause_wait_s)),
            *("--upstream-grace-s", repr(settings.upstream_grace_s)),
            *(("--admin-url", admin) if admin else ()),
            *http_limit_flags(settings, admin=False),
            *request_cap_flags(settings),
            *(("--tokenizer", str(served)) if served else ()),
            *(("--chat-template", str(template)) if template else ()),
            *remote,
            *link,
            *(("--listen-fd", str(listen_fd)) if listen_fd is not None else ()),
        )
        specs.append(
            ChildSpec(
                name=f"worker-{worker_id}",
                role="worker",
                argv=argv,
                ready=ReadyCheck("worker-http", worker_id)
                if on_worker_host
                else ReadyCheck("worker", worker_id),
                socket_files=()
                if on_worker_host
                else (_ipc_file(worker_address(run_dir, worker_id)),),
                worker_id=worker_id,
                pass_fds=() if listen_fd is None else (listen_fd,),
            )
        )
    return specs
