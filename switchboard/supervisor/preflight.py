"""Checks run before any child starts, so a bad setting fails at once in one line.

Each refusal names the setting as the operator gave it (``--port 9000``,
``SWITCHBOARD_RUN_DIR=/x``, ``stack.toml: tokenizer = "/models/m"``:
:meth:`StackSettings.origin`), then what is wrong and what is expected.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path

from router_core.audit import FILE_MODE as AUDIT_FILE_MODE
from router_core.endpoints import RouterEndpoints
from router_core.run_dir import RunDirError, check_private
from router_core.worker_gateway import requests_listen_for
from switchboard.supervisor.engine_command import command_words
from switchboard.supervisor.engine_settings import served_tokenizer
from switchboard.supervisor.rundir import MAX_IPC_PATH, socket_in_use
from switchboard.supervisor.settings import SettingsError, StackSettings
from switchboard.text import TextCodec, TokenizerLoadError, load_tokenizer

__all__ = [
    "check_audit_log",
    "check_chat_template",
    "check_engine_command",
    "check_gateway_ports",
    "check_port_free",
    "check_run_dir",
    "check_tokenizer",
    "preflight",
]

#: The longest socket file name the stack puts in the run directory (see ``layout``).
_LONGEST_SOCKET_NAME = "router-engine-events"


def check_port_free(host: str, port: int, *, where: str = "", host_where: str = "") -> None:
    """SettingsError unless ``host:port`` can be bound now; ``where`` and ``host_where``
    name the port's and the host's settings (default ``port N``, ``host H``).

    The probe binds without SO_REUSEPORT, so a server already listening there (even one
    that set SO_REUSEPORT itself) makes it fail; SO_REUSEADDR keeps a port that only has
    connections in TIME_WAIT usable, as it is for the workers.
    """
    where = where or f"port {port}"
    try:
        infos = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        named = host_where or f"host {host}"
        raise SettingsError(f"{named}: cannot resolve: {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    probe = socket.socket(family, kind, proto)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise SettingsError(f"{where}: already in use on {host}") from exc
        raise SettingsError(f"{where}: cannot bind {host}:{port}: {exc.strerror}") from exc
    finally:
        probe.close()


def check_tokenizer(path: Path | None, *, where: str = "") -> TextCodec:
    """Load the tokenizer the children will load; SettingsError if it cannot be, naming
    ``where`` (default ``tokenizer PATH``), the reason and what a tokenizer path may be.

    Loading the built-in default here also trains and caches it once, before the
    children start, instead of in every child at the same time.
    """
    try:
        return load_tokenizer(path)
    except TokenizerLoadError as exc:
        raise SettingsError(f"{where or f'tokenizer {exc.path}'}: {exc.reason}") from exc


def check_run_dir(path: Path | None, *, where: str = "") -> None:
    """SettingsError if a given run directory is not a private directory
    (:func:`router_core.run_dir.check_private`; one that does not exist yet is created
    private later), is too deep for ipc paths, or already holds a running stack;
    ``where`` names the setting (default ``run_dir PATH``)."""
    if path is None:
        return
    where = where or f"run_dir {path}"
    given = path.expanduser()
    if given.exists() or given.is_symlink():
        try:
            check_private(given)
        except RunDirError as exc:
            raise SettingsError(f"{where}: {exc}") from None
    resolved = given.resolve()
    longest = len(str(resolved / _LONGEST_SOCKET_NAME))
    if longest > MAX_IPC_PATH:
        raise SettingsError(
            f"{where}: too long for ipc socket paths ({longest} > {MAX_IPC_PATH} bytes)"
        )
    # A router answering on the control socket there means a stack already runs in it.
    control = RouterEndpoints.in_run_dir(resolved).control.removeprefix("ipc://")
    if socket_in_use(Path(control)):
        raise SettingsError(f"{where}: another stack is running there")


def check_chat_template(
    tokenizer: TextCodec, tokenizer_path: Path | None, override: Path | None, *, where: str = ""
) -> None:
    """SettingsError unless the workers' chat template loads as they will load it: the
    ``override`` file (``where`` names its setting, default ``chat_template PATH``), else
    the model's own (a model without one is fine: its chat requests are refused)."""
    from switchboard.text.chat_template_source import ChatTemplateLoadError, load_chat_template

    try:
        load_chat_template(tokenizer, tokenizer_path, override)
    except ChatTemplateLoadError as exc:
        if override is not None:
            raise SettingsError(f"{where or f'chat_template {exc.source}'}: {exc.reason}") from exc
        raise SettingsError(f"{exc} (set chat_template to use another)") from exc


def check_audit_log(path: Path | None, *, where: str = "") -> None:
    """SettingsError unless the admin app's audit file can be opened for appending (it
    is created, mode 0600, as the admin app would); ``where`` names the setting."""
    if path is None:
        return
    try:
        handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, AUDIT_FILE_MODE)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SettingsError(
            f"{where or f'admin_audit_log {path}'}: cannot open for appending: {reason} "
            "(expected a file, or a path to create one at, in a writable directory)"
        ) from exc
    os.close(handle)


def check_engine_command(
    command: str | None, cwd: Path | None, env: Mapping[str, str], *, where: str = ""
) -> None:
    """SettingsError unless ``command``'s program can be found as the supervisor will
    run it: a path (relative to ``cwd``) to an executable file, or a name on the
    ``PATH`` (``env``'s own ``PATH`` if it sets one); and ``cwd`` is a directory."""
    if command is None:
        return
    where = where or f"engine_command {command}"
    if cwd is not None and not cwd.is_dir():
        raise SettingsError(f"engine_cwd {cwd}: not a directory")
    program = command_words(command)[0]
    if "{" in program or "}" in program:
        return  # it names a place of the stack ({run_dir}/engine): known only at start
    if "/" in program:
        path = (cwd or Path.cwd()) / program
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SettingsError(f"{where}: {program} is not an executable file")
        return
    search = env.get("PATH", os.environ.get("PATH", os.defpath))
    if shutil.which(program, path=search) is None:
        raise SettingsError(f"{where}: {program} not found on the PATH ({search})")


def check_gateway_ports(settings: StackSettings) -> None:
    """SettingsError unless the worker gateway's PORT and PORT+1 can be bound now."""
    if settings.gateway_listen is None:
        return
    where = settings.origin("gateway_listen")
    for endpoint in (settings.gateway_listen, requests_listen_for(settings.gateway_listen)):
        host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
        check_port_free(host, int(port), where=where, host_where=where)


def preflight(settings: StackSettings) -> TextCodec:
    """Every check, cheapest first (the audit file last: it is created when it can be,
    and no other refusal should leave it behind); returns the loaded tokenizer."""
    check_run_dir(settings.run_dir, where=settings.origin("run_dir"))
    host = settings.origin("host")
    if settings.role != "control":  # the HTTP workers' port
        check_port_free(
            settings.host, settings.port, where=settings.origin("port"), host_where=host
        )
    if settings.role != "workers":  # the admin app's port and the gateway's two
        admin_port = settings.origin("admin_port")
        check_port_free(settings.host, settings.admin_port, where=admin_port, host_where=host)
        check_gateway_ports(settings)
    if settings.engine == "llama-cpp":
        # The model's vocabulary, loaded as the workers will: a file that is missing, not
        # GGUF, or of an architecture llama.cpp does not know fails here, in one line.
        tokenizer = check_tokenizer(settings.model, where=settings.origin("model"))
    else:
        tokenizer = check_tokenizer(settings.tokenizer, where=settings.origin("tokenizer"))
    check_chat_template(
        tokenizer,
        served_tokenizer(settings),
        settings.chat_template,
        where=settings.origin("chat_template"),
    )
    if settings.role != "workers":
        check_engine_command(
            settings.engine_command,
            settings.engine_cwd,
            settings.engine_env or {},
            where=settings.origin("engine_command"),
        )
    check_audit_log(settings.admin_audit_log, where=settings.origin("admin_audit_log"))
    return tokenizer
