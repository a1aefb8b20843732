"""Every operator command run the same way, from its command object alone.

:func:`run_command` sends the command's arguments (its struct's fields, as the command
line gave them) to its admin path through an :class:`AdminClient` and returns an
:class:`Outcome`: the API's JSON (printed by ``--json``), its text in the rendering the
command names (:data:`RENDERINGS`), and the one line that makes the command fail, if
any. ``--watch`` (reads that offer it) shows the answer again every few seconds.
:func:`execute` owns everything around it: settings from flags and environment,
printing, and exit statuses.
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

from app.catalogue import Command
from router_core.control.command_model import Rendering
from router_core.limits import DEFAULT_BARRIER_TIMEOUT_S
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
from switchboard.admin_cli.drain_wait import wait_until_safe
from switchboard.admin_cli.errors import (
    EXIT_FAILED,
    EXIT_OK,
    AdminCliError,
    UnexpectedAnswer,
    UsageProblem,
)
from switchboard.admin_cli.parsers import (
    BARRIER_GRACE_S,
    BARRIER_TIMEOUT,
    CLI_COMMANDS,
    DEFAULT_HTTP_TIMEOUT_S,
)

__all__ = ["MAX_SHOWINGS", "RENDERINGS", "Outcome", "execute", "run_command"]

#: The exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Outcome:
    """What a command got: the API's JSON, its text form, and a failure line if it failed."""

    body: Any
    #: The body as text, decoded only when it is shown (``--json`` prints it as it came).
    text: Callable[[], str]
    failure: str | None = None


def _fields_text(body: Any) -> str:
    """Any answer as ``key  value`` lines, its top-level fields (lists comma-joined)."""
    if not isinstance(body, dict):
        return json.dumps(body)
    return render.key_values(
        (key, ", ".join(map(str, value)) if isinstance(value, list) else str(value))
        for key, value in body.items()
        if not isinstance(value, dict)
    )


#: Each rendering a command may name (:class:`~router_core.control.command_model.Cli`):
#: ``text(body, now)``, the answer's JSON decoded and shown.
RENDERINGS: Final[dict[Rendering, Callable[[Any, float], str]]] = {
    "status": lambda body, now: render.status_text(decode(Status, body), now),
    "workers": lambda body, now: render.workers_table(decode(WorkerList, body).workers),
    "worker": lambda body, now: render.workers_table([decode(Worker, body)]),
    "load": lambda body, now: render.load_text(decode(LoadResponse, body).load),
    "operation": lambda body, now: render.operation_text(decode(Operation, body)),
    "freeze_gc": lambda body, now: render.freeze_gc_text(decode(FreezeGcResult, body)),
    "fields": lambda body, now: _fields_text(body),
}


def _body(entry: Command, args: argparse.Namespace) -> dict[str, Any]:
    """The JSON body of ``entry``'s arguments as the command line gave them (a
    barrier's timeout is ``--timeout-s``, which stands for the HTTP timeout elsewhere)."""
    body: dict[str, Any] = {}
    for argument in entry.body_arguments():
        if argument.name == BARRIER_TIMEOUT:
            body[argument.name] = args.timeout or DEFAULT_BARRIER_TIMEOUT_S
        else:
            body[argument.name] = getattr(args, argument.name)
    return body


def _failure(entry: Command, status: int, body: Any) -> str | None:
    """Why a barrier's answer is a failure (not complete, or a 504), or None."""
    if not entry.barrier:
        return None
    try:
        op = decode(Operation, body)
    except UnexpectedAnswer:
        raise api_error(status, body) from None
    if op.complete and status == 200:
        return None
    stragglers = render.names(op.stragglers)
    return f"timed out after {render.elapsed(op.elapsed_s)}; stragglers: {stragglers}"


def run_command(client: AdminClient, entry: Command, args: argparse.Namespace) -> Outcome:
    """Ask the admin app ``entry`` with the command line's arguments; the answer, its
    text (``entry.cli.render``), and a barrier's failure (200 only when every worker and
    the engine acknowledged; a 504 names the stragglers)."""
    path = entry.path_for(
        **{each.name: getattr(args, each.name) for each in entry.arguments if each.place == "path"}
    )
    now = time.time()
    if entry.method == "GET":
        status, body = 200, client.get(path)
    else:
        timeout_s = None
        if entry.barrier:
            timeout_s = (args.timeout or DEFAULT_BARRIER_TIMEOUT_S) + BARRIER_GRACE_S
        answer = client.request(
            entry.method,
            path,
            body=_body(entry, args) if entry.body_arguments() else None,
            timeout_s=timeout_s,
            accept=(200, 504) if entry.barrier else (200,),
        )
        status, body = answer.status, answer.body
    failure = _failure(entry, status, body)
    rendering = RENDERINGS[entry.cli.render if entry.cli else "fields"]
    return Outcome(body, lambda: rendering(body, now), failure)


#: What ``--watch`` prints before each new showing: cursor home, clear below.
_CLEAR: Final = "\x1b[H\x1b[J"
#: The most showings ``--watch`` makes (a day at 2 s): a bound, not a limit anyone meets.
MAX_SHOWINGS: Final = 43_200


def _showings(args: argparse.Namespace) -> int:
    """How many times to show the answer: once, or with ``--watch`` until Ctrl-C."""
    return MAX_SHOWINGS if getattr(args, "watch", None) else 1


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
    http_timeout = DEFAULT_HTTP_TIMEOUT_S if args.timeout is None else args.timeout
    try:
        try:
            target = connection(args.url, args.token, os.environ)
        except ValueError as exc:
            raise UsageProblem(str(exc)) from exc
        with AdminClient(target.url, target.token, http_timeout, transport=transport) as client:
            outcome = run_command(client, entry, args)
            if getattr(args, "wait", None) and outcome.failure is None:
                body = wait_until_safe(client, args.worker_id, args.wait)
                outcome = Outcome(body, lambda: RENDERINGS["worker"](body, time.time()))
            _print(json.dumps(outcome.body, indent=2) if args.json else outcome.text())
            try:
                for _ in range(_showings(args) - 1):
                    time.sleep(args.watch)
                    outcome = run_command(client, entry, args)
                    text = json.dumps(outcome.body) if args.json else outcome.text()
                    _print(_CLEAR + text)
            except KeyboardInterrupt:
                pass  # Ctrl-C is how a watch ends: the last answer stands
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
