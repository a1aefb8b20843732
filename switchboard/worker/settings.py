"""How one HTTP worker runs.

The flagged fields are the ``switchboard worker`` flags (:mod:`router_core.settings_fields`):
their defaults, bounds and help are written here only, and ``switchboard up`` takes its
defaults for what it passes to the workers from here too.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from httpkit.hosts import parse_allowed_hosts
from httpkit.limits import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEADER_BYTES,
    HttpLimits,
)
from router_core.settings_fields import flagged
from switchboard.worker.caps import RequestCaps

if TYPE_CHECKING:
    # Only a type here: ``switchboard up`` reads this module's defaults without loading
    # the link (and zmq with it).
    from router_core.worker_link import WorkerLinkSettings

__all__ = ["LEAVE_PORT_SIGNAL", "LISTEN_BACKLOG", "WORKER_HEADER", "WorkerSettings"]

#: The response header of ``/health`` naming the worker that answered (the port is
#: shared, so a supervisor or an operator learns who answered from it).
WORKER_HEADER: Final = "X-Switchboard-Worker"
#: Pending connections the kernel queues on a workers' listening socket.
LISTEN_BACKLOG: Final = 2048
#: What a supervisor sends its workers when the whole stack stops: from then on a worker
#: that stops taking connections closes its copies of the shared listening socket
#: (no sibling will take them), so that new clients are refused at once.
LEAVE_PORT_SIGNAL: Final = signal.SIGUSR1


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    """One worker's identity, HTTP address, model facts, stop and link.

    ``graceful_timeout_s`` is 10 s whoever starts the worker. Under ``switchboard up``
    the workers are drained before SIGTERM, so little is left in flight by then, and the
    supervisor waits ``stop_timeout_s`` (10 s) *beyond* the worker's graceful period
    before SIGKILL: a worker started with the default always finishes its own stop.
    """

    worker_id: str = flagged(help="this worker's id, e.g. w0")
    link: WorkerLinkSettings
    host: str = flagged("127.0.0.1", help="HTTP address")
    port: int = flagged(8000, help="HTTP port, shared with the sibling workers", bound="port")
    #: The name clients pass as ``model`` and ``/v1/models`` lists.
    model_name: str = flagged("switchboard-sim", help="the served model name")
    #: The Jinja file /v1/chat/completions renders messages with; empty: the model's own
    #: (:func:`~switchboard.text.chat_template_source.load_chat_template`).
    chat_template: str = flagged(
        "",
        help="a Jinja chat template file for /v1/chat/completions (default: the model's own; "
        "ChatML for the built-in tokenizer)",
    )
    #: Longest prompt plus output, in tokens; longer requests are refused with 400.
    context_length: int = flagged(8192, help="prompt + output tokens, max", bound="positive")
    #: ``max_new_tokens`` when a request gives none (SGLang's default).
    default_max_new_tokens: int = flagged(
        128, help="max_new_tokens when a request gives none", bound="positive"
    )
    #: What one request may ask for (their own flags: :class:`RequestCaps`).
    caps: RequestCaps = field(default_factory=RequestCaps)
    #: Read a body as JSON whatever its ``Content-Type`` says (or without one), for old
    #: clients; off, a body not declared as JSON is refused with 415.
    accept_any_content_type: bool = False
    #: Refuse (400) a body field no endpoint names; off, such a field is ignored and
    #: counted (``switchboard_ignored_fields_total``), so new gateway fields pass.
    reject_unknown_fields: bool = False
    #: Seconds a stopping worker (or a pause past pause_wait_s) asks clients to wait.
    retry_after_s: int = flagged(
        5,
        help="Retry-After seconds of a 503 while stopping or paused past --pause-wait-s",
        aliases=("--retry-after",),
        bound="non_negative",
    )
    #: Seconds in-flight requests may take to finish after SIGTERM.
    graceful_timeout_s: float = flagged(
        10.0,
        help="seconds in-flight requests may take to finish after SIGTERM",
        aliases=("--graceful-timeout",),
        bound="positive",
    )
    #: Seconds ``/health_generate`` waits for its one-token generation.
    health_generate_timeout_s: float = 20.0
    max_body_bytes: int = flagged(
        16 * 1024 * 1024,
        help="largest request body in bytes; a larger one (declared or chunked) is answered 413",
        bound="positive",
    )
    #: The HTTP limits (:mod:`httpkit.limits`), per worker process.
    max_header_bytes: int = flagged(
        DEFAULT_MAX_HEADER_BYTES,
        help="largest request head (request line and headers) in bytes; beyond, 431",
        bound="positive",
    )
    header_timeout_s: float = flagged(
        DEFAULT_HEADER_TIMEOUT_S,
        help="seconds a request head has to arrive whole from its first byte; then 408",
        bound="positive",
    )
    body_timeout_s: float = flagged(
        DEFAULT_BODY_TIMEOUT_S,
        help="seconds a request body has to arrive whole after its head; then 408",
        bound="positive",
    )
    #: Streams carry their own data; idle keep-alive connections are kept a little longer
    #: than the typical client pool's (httpx: 5 s), so the server is not the one dropping
    #: a connection just as the client reuses it.
    keep_alive_s: float = flagged(
        10.0,
        help="seconds a connection without a request in progress (a fresh one too) stays open",
        bound="positive",
    )
    max_connections: int = flagged(
        DEFAULT_MAX_CONNECTIONS,
        help="connections this worker process holds at once; beyond, 503 and close",
        bound="positive",
    )
    allowed_hosts: str = flagged(
        "",
        help="Host names accepted besides localhost, loopback and the address a request came "
        "in on (comma-separated; * accepts any); others get 421",
    )
    #: Where the SGLang operator endpoints (``/pause_generation``, ``/continue_generation``,
    #: ``/abort_request``) send what they are asked, with the caller's token: the admin
    #: app, which authenticates, checks the role and audits it. Empty: they answer 503.
    admin_url: str = flagged(
        "",
        help="the admin app's URL, e.g. http://127.0.0.1:8001: /pause_generation, "
        "/continue_generation and /abort_request are forwarded there with the caller's "
        "Authorization header (default: none, they answer 503; switchboard up passes its own)",
    )
    version: str = ""

    def __post_init__(self) -> None:
        if self.context_length < 2:
            raise ValueError("context_length must be at least 2")
        if not 0 < self.default_max_new_tokens < self.context_length:
            raise ValueError("default_max_new_tokens must be in [1, context_length)")
        if self.retry_after_s < 0 or self.health_generate_timeout_s <= 0:
            raise ValueError("retry_after_s must be >= 0 and health_generate_timeout_s > 0")
        if self.graceful_timeout_s <= 0:
            raise ValueError("graceful_timeout_s must be > 0")
        self.http_limits  # noqa: B018 (raises for a limit out of bounds)
        parse_allowed_hosts(self.allowed_hosts)
        _check_admin_url(self.admin_url)

    @property
    def http_limits(self) -> HttpLimits:
        """The HTTP limits these settings set."""
        return HttpLimits.of(self)


def _check_admin_url(url: str) -> None:
    """ValueError unless ``url`` is empty or ``http(s)://host[:port][/prefix]`` (a proxy's
    mount point), without credentials, query or fragment: callers' tokens go there."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"admin_url {url!r} is not an http:// or https:// URL")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"admin_url {url!r} may not carry credentials, a query or a fragment")
