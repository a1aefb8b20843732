"""One handler per operator command, dispatched through :data:`COMMANDS` by the name of
the command's catalogue entry (:mod:`app.catalogue`), which gives it the path to call.

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

import httpx

from app.catalogue import DEFAULT_BARRIER_TIMEOUT_S, TIMEOUT, Command
from switchboard.admin_cli import render
from switchboard.admin_cli.answers import (
    FreezeGcResult,
    LoadResponse,
    Operation,
    Status,
    Worker,
    WorkerList,
    decode,
)
from switchboard.admin_cli.arguments import connection
from switchboard.admin_cli.client import AdminClient, api_error
from switchboard.admin_cli.errors import (
    EXIT_FAILED,
    EXIT_OK,
    AdminCliError,
    UnexpectedAnswer,
    UsageProblem,
)
from switchboard.admin_cli.parsers import (
    BARRIER_GRACE_S,
    CLI_COMMANDS,
    DEFAULT_HTTP_TIMEOUT_S,
)

__all__ = ["COMMANDS", "Outcome", "execute"]

#: The exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Outcome:
    """What a command got: the API's JSON, its text form, and a failure line if it failed."""

    body: Any
    #: The body as text, decoded only when it is shown (``--json`` prints it as it came).
    text: Callable[[], str]
    failure: str | None = None


#: A handler: the admin client, the catalogue entry it runs, and the parsed command line.
Handler = Callable[[AdminClient, Command, argparse.Namespace], Outcome]


def barrier(client: AdminClient, entry: Command, args: argparse.Namespace) -> Outcome:
    """``POST /api/pause {mode, timeout_s}`` or ``POST /api/continue {timeout_s}`` ->
    Operation: 200 when every worker and the engine acknowledged, 504 naming stragglers."""
    barrier_s = args.timeout or DEFAULT_BARRIER_TIMEOUT_S
    body = {
        argument.name: barrier_s if argument is TIMEOUT else getattr(args, argument.name)
        for argument in entry.body_arguments()
    }
    answer = client.request(
        entry.method,
        entry.path,
        body=body,
        timeout_s=barrier_s + BARRIER_GRACE_S,
        accept=(200, 504),
    )
    try:
        op = decode(Operation, answer.body)
    except UnexpectedAnswer:
        raise api_error(answer.status, answer.body) from None
    failure = None
    if not op.complete or answer.status != 200:
        stragglers = render.names(op.stragglers)
        failure = f"timed out after {render.elapsed(op.elapsed_s)}; stragglers: {stragglers}"
    return Outcome(answer.body, lambda: render.operation_text(op), failure)


def status(client: AdminClient, entry: Command, args: argparse.Namespace) -> Outcome:
    """``GET /api/status`` -> Status."""
    now, body = time.time(), client.get(entry.path)
    return Outcome(body, lambda: render.status_text(decode(Status, body), now))


def workers(client: AdminClient, entry: Command, args: argparse.Namespace) -> Outcome:
    """``GET /api/workers`` -> ``{"workers": [Worker]}``."""
    body = client.get(entry.path)
    return Outcome(body, lambda: render.workers_table(decode(WorkerList, body).workers))


def worker_action(client: AdminClient, entry: Command, args: argparse.Namespace) -> Outcome:
    """``POST /api/workers/{id}/drain`` or ``/undrain`` -> Worker (404 unknown, 409
    conflict)."""
    body = client.request(entry.method, entry.path_for(worker_id=args.worker_id)).body
    return Outcome(body, lambda: render.workers_table([decode(Worker, body)]))


def load(client: AdminClient, entry: Command, args: argparse.Namespace) -> Outcome:
    """``GET /api/load`` -> ``{"load": Load | null}``."""
    body = client.get(entry.path)
    return Outcome(body, lambda: render.load_text(decode(LoadResponse, body).load))


def freeze_gc(client: AdminClient, entry: Command, args: argparse.Namespace) -> Outcome:
    """``POST /api/freeze_gc`` -> ``{"frozen": [...], "forwarded_to": [...]}``."""
    body = client.request(entry.method, entry.path).body
    return Outcome(body, lambda: render.freeze_gc_text(decode(FreezeGcResult, body)))


#: The handler of each catalogue entry the CLI offers, by the entry's name.
COMMANDS: Final[dict[str, Handler]] = {
    "status": status,
    "workers": workers,
    "pause": barrier,
    "continue": barrier,
    "drain": worker_action,
    "undrain": worker_action,
    "load": load,
    "freeze_gc": freeze_gc,
}


def _print(text: str) -> None:
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # The reader (say, `| head`) left: nothing more to say, and nothing to say it to.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def execute(args: argparse.Namespace, *, transport: httpx.BaseTransport | None = None) -> int:
    """Run ``args.command``; print its answer, or one line on stderr; the exit status.

    ``--url`` and ``--token`` fall back to ``SWITCHBOARD_ADMIN_URL`` and
    ``SWITCHBOARD_ADMIN_TOKEN`` (:func:`~switchboard.admin_cli.arguments.connection`).
    ``transport`` replaces the network in tests.
    """
    entry = CLI_COMMANDS[args.command]
    handler = COMMANDS[entry.name]
    http_timeout = DEFAULT_HTTP_TIMEOUT_S if args.timeout is None else args.timeout
    try:
        try:
            target = connection(args.url, args.token, os.environ)
        except ValueError as exc:
            raise UsageProblem(str(exc)) from exc
        with AdminClient(target.url, target.token, http_timeout, transport=transport) as client:
            outcome = handler(client, entry, args)
        _print(json.dumps(outcome.body, indent=2) if args.json else outcome.text())
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
