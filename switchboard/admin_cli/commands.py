"""One handler per operator command, dispatched through :data:`COMMANDS`.

A handler asks the admin app through an :class:`AdminClient` and returns an
:class:`Outcome`: the API's JSON (printed by ``--json``), how to render it as text, and
the one line that makes the command fail, if any. :func:`execute` owns everything
around it: settings from flags and environment, printing, and exit statuses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import httpx

from switchboard.admin_cli import (
    BARRIER_GRACE_S,
    DEFAULT_BARRIER_TIMEOUT_S,
    DEFAULT_HTTP_TIMEOUT_S,
    DEFAULT_URL,
    render,
)
from switchboard.admin_cli.client import AdminClient, api_error
from switchboard.admin_cli.errors import EXIT_FAILED, EXIT_OK, AdminCliError, OperationFailed

__all__ = ["COMMANDS", "Outcome", "execute"]

#: The exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Outcome:
    """What a command got: the API's JSON, its text form, and a failure line if it failed."""

    body: Any
    render: Callable[[Any], str]
    failure: str | None = None


Handler = Callable[[AdminClient, argparse.Namespace], Outcome]


def _operation(client: AdminClient, args: argparse.Namespace, path: str, body: Any) -> Outcome:
    """A barrier: 200 when every worker and the engine acknowledged, 504 naming stragglers."""
    barrier_s = args.timeout or DEFAULT_BARRIER_TIMEOUT_S
    answer = client.request(
        "POST",
        path,
        body={**body, "timeout_s": barrier_s},
        timeout_s=barrier_s + BARRIER_GRACE_S,
        accept=(200, 504),
    )
    op = answer.body
    if not (isinstance(op, dict) and "complete" in op):
        raise api_error(answer.status, op)
    failure = None
    if not op["complete"] or answer.status != 200:
        stragglers = render.names(op.get("stragglers"))
        failure = f"timed out after {render.elapsed(op.get('elapsed_s'))}; stragglers: {stragglers}"
    return Outcome(op, render.operation_text, failure)


def status(client: AdminClient, args: argparse.Namespace) -> Outcome:
    """``GET /api/status``."""
    now = time.time()
    return Outcome(client.get("/api/status"), lambda body: render.status_text(body, now))


def workers(client: AdminClient, args: argparse.Namespace) -> Outcome:
    """``GET /api/workers`` -> ``{"workers": [Worker]}``."""
    return Outcome(client.get("/api/workers"), lambda body: render.workers_table(body["workers"]))


def pause(client: AdminClient, args: argparse.Namespace) -> Outcome:
    """``POST /api/pause {mode, timeout_s}`` -> Operation (200, or 504 on timeout)."""
    return _operation(client, args, "/api/pause", {"mode": args.mode})


def continue_(client: AdminClient, args: argparse.Namespace) -> Outcome:
    """``POST /api/continue {timeout_s}`` -> Operation (200, or 504 on timeout)."""
    return _operation(client, args, "/api/continue", {})


def _worker_command(verb: str) -> Handler:
    def command(client: AdminClient, args: argparse.Namespace) -> Outcome:
        path = f"/api/workers/{quote(args.worker_id, safe='')}/{verb}"
        worker = client.request("POST", path).body
        return Outcome(worker, lambda body: render.workers_table([body]))

    command.__doc__ = f"``POST /api/workers/{{id}}/{verb}`` -> Worker (404 unknown, 409 conflict)."
    return command


def load(client: AdminClient, args: argparse.Namespace) -> Outcome:
    """``GET /api/load`` -> ``{"load": Load | null}``."""
    return Outcome(client.get("/api/load"), lambda body: render.load_text(body["load"]))


COMMANDS: Final[dict[str, Handler]] = {
    "status": status,
    "workers": workers,
    "pause": pause,
    "continue": continue_,
    "drain": _worker_command("drain"),
    "undrain": _worker_command("undrain"),
    "load": load,
}


def _environment(name: str) -> str | None:
    return os.environ.get(name) or None


def _print(text: str) -> None:
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # The reader (say, `| head`) left: nothing more to say, and nothing to say it to.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _text(outcome: Outcome) -> str:
    try:
        return outcome.render(outcome.body)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise OperationFailed(f"unexpected answer from the admin app ({exc!r})") from exc


def execute(args: argparse.Namespace, *, transport: httpx.BaseTransport | None = None) -> int:
    """Run ``args.command``; print its answer, or one line on stderr; the exit status.

    ``--url`` and ``--token`` fall back to ``SWITCHBOARD_ADMIN_URL`` and
    ``SWITCHBOARD_ADMIN_TOKEN``. ``transport`` replaces the network in tests.
    """
    handler = COMMANDS[args.command]
    url = args.url or _environment("SWITCHBOARD_ADMIN_URL") or DEFAULT_URL
    token = args.token or _environment("SWITCHBOARD_ADMIN_TOKEN")
    http_timeout = DEFAULT_HTTP_TIMEOUT_S if args.timeout is None else args.timeout
    try:
        with AdminClient(url, token, http_timeout, transport=transport) as client:
            outcome = handler(client, args)
        _print(json.dumps(outcome.body, indent=2) if args.json else _text(outcome))
    except AdminCliError as exc:
        print(f"switchboard {args.command}: {exc.message}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print(f"switchboard {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if outcome.failure is not None:
        print(f"switchboard {args.command}: {outcome.failure}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
