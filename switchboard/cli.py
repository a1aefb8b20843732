"""The ``switchboard`` command: run routing processes, talk to them, benchmark them."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import msgspec
import zmq

from router_core import tracing
from router_core.control import ControlClient, ControlError
from router_core.detokenizer_router import DetokenizerRouter, DetokenizerRouterSettings
from router_core.endpoints import (
    DetokenizerRouterEndpoints,
    EndpointError,
    RouterEndpoints,
    check_endpoint,
)
from router_core.process import Service, die_with_parent, serve_until_signalled
from router_core.tokenizer_router import RouterSettings, TokenizerRouter

__all__ = ["build_parser", "main"]


class UsageError(Exception):
    """A bad command line or setting: reported in one line, exit status 2."""


class _OneLineParser(argparse.ArgumentParser):
    """Reports a bad command line in one line (``--help`` still prints the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", help="directory for default ipc:// endpoints")
    parser.add_argument("--hwm", type=_positive_int, default=10_000, help="socket high-water mark")
    parser.add_argument(
        "--backlog",
        type=_positive_int,
        default=1000,
        help="messages queued per destination beyond the HWM before dropping",
    )
    parser.add_argument(
        "--allow-remote", action="store_true", help="permit tcp:// endpoints beyond loopback"
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument(
        "--parent-pid", type=int, help="exit when this process (the supervisor) dies"
    )


def _add_routing_parsers(sub: Any) -> None:
    """``router``, ``detok-router`` and ``engine``."""
    router = sub.add_parser("router", help="run the tokenizer router")
    _add_common(router)
    for name, help_text in (
        ("requests", "PULL the router binds for worker requests"),
        ("workers", "PULL the router binds for worker registration and heartbeats"),
        ("engine", "the engine's input endpoint (the router connects)"),
        ("engine-events", "PULL the router binds for engine acks and load"),
        ("outputs", "PULL the router binds for outputs routed back to workers"),
        ("control", "ROUTER the router binds for control commands"),
    ):
        router.add_argument(f"--{name}-endpoint", help=f"{help_text} (default: in --run-dir)")
    router.add_argument("--heartbeat-interval", type=_positive_float, default=1.0)
    router.add_argument("--heartbeat-timeout", type=_positive_float, default=5.0)
    router.add_argument("--barrier-timeout", type=_positive_float, default=5.0)
    router.add_argument("--engine-timeout", type=_positive_float, default=10.0)

    detok = sub.add_parser("detok-router", help="run the detokenizer router")
    _add_common(detok)
    detok.add_argument("--detokenizers", type=_positive_int, default=1, help="how many (M)")
    detok.add_argument("--inbound-endpoint", help="PULL bound for engine outputs")
    detok.add_argument(
        "--detokenizer-endpoint", action="append", help="a detokenizer's endpoint (repeat)"
    )
    detok.add_argument("--control-endpoint", help="ROUTER bound for control commands")
    detok.add_argument(
        "--sticky-key",
        choices=("worker", "worker-crc32", "request"),
        default="worker",
        help="worker: each worker to the least-used detokenizer when first seen (default); "
        "worker-crc32: crc32(worker address) %% M, as the seed; request: crc32(rid) %% M",
    )

    engine = sub.add_parser("engine", help="run the built-in simulated engine")
    _add_common(engine)
    engine.add_argument("--inbound-endpoint", help="PULL bound for requests (default: run dir)")
    engine.add_argument("--events-endpoint", help="the router's engine-events PULL")
    engine.add_argument("--outputs-endpoint", help="where batched outputs go")
    engine.add_argument(
        "--outputs-via",
        choices=("detokenizers", "router"),
        default="detokenizers",
        help="default outputs: the detokenizer router, or the tokenizer router's outputs",
    )
    engine.add_argument("--max-running-requests", type=_positive_int, default=256)
    engine.add_argument(
        "--max-tokens-per-step", type=_positive_int, default=8192, help="prefill + decode budget"
    )
    engine.add_argument(
        "--step-time", type=_non_negative_float, default=0.005, help="seconds per step"
    )
    engine.add_argument(
        "--per-token-cost", type=_non_negative_float, default=0.0, help="seconds per token"
    )
    engine.add_argument("--vocab-seed", type=int, default=0, help="seed of the token rule")
    engine.add_argument("--tokenizer", help="tokenizer.json or model directory (default: built in)")
    engine.add_argument(
        "--load-interval", type=_positive_float, default=0.1, help="seconds between load reports"
    )


def build_parser(*, with_up_flags: bool = True) -> argparse.ArgumentParser:
    """The whole command line, documented in ``--help``.

    ``with_up_flags=False`` gives ``up`` a bare parser: its flags are generated from the
    settings model, which loads pydantic, and a child process started for another
    command need not pay for that at every start.
    """
    parser = _OneLineParser(prog="switchboard", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)

    _add_routing_parsers(sub)
    from app.cli import add_parser as add_admin
    from switchboard.admin_cli import add_parsers as add_admin_commands
    from switchboard.detokenizer.cli import add_parser as add_detokenizer
    from switchboard.worker.cli import add_parser as add_worker

    add_detokenizer(sub, _add_common)
    add_worker(sub, _add_common)
    add_admin(sub, _add_common)
    add_admin_commands(sub)
    if with_up_flags:
        from switchboard.supervisor.cli import add_parser as add_up

        add_up(sub)
    else:
        sub.add_parser("up", help="start the whole stack (see switchboard up --help)")

    ctl = sub.add_parser("ctl", help="send one control command and print the JSON result")
    ctl.add_argument("--endpoint", required=True, help="the control endpoint")
    ctl.add_argument("--timeout", type=_positive_float, default=10.0)
    ctl.add_argument("name", help="command name, e.g. status, list_workers, pause")
    ctl.add_argument("args", nargs="*", help="key=value arguments (values parsed as JSON)")

    bench = sub.add_parser("bench", help="run a benchmark")
    bench.add_argument("suite", choices=("router", "e2e", "observability"))
    bench.add_argument("--quick", action="store_true", help="short run (under 60 s)")
    bench.add_argument("--json", dest="json_path", help="write the results here")
    return parser


def _endpoint(explicit: str | None, default: str | None, what: str, allow_remote: bool) -> str:
    chosen = explicit or default
    if chosen is None:
        raise UsageError(f"--{what}-endpoint is required without --run-dir")
    try:
        return check_endpoint(chosen, allow_remote=allow_remote)
    except EndpointError as exc:
        raise UsageError(str(exc)) from exc


def _run_dir(args: argparse.Namespace) -> str | None:
    run_dir: str | None = args.run_dir
    if run_dir is not None and not os.path.isdir(run_dir):
        raise UsageError(f"--run-dir {run_dir}: not a directory")
    return run_dir


def _router(args: argparse.Namespace) -> TokenizerRouter:
    run_dir = _run_dir(args)
    defaults = RouterEndpoints.in_run_dir(run_dir) if run_dir else None
    remote = args.allow_remote
    endpoints = RouterEndpoints(
        **{
            field: _endpoint(
                getattr(args, f"{field}_endpoint"),
                getattr(defaults, field) if defaults else None,
                field.replace("_", "-"),
                remote,
            )
            for field in ("requests", "workers", "engine", "engine_events", "outputs", "control")
        }
    )
    try:
        settings = RouterSettings(
            endpoints=endpoints,
            heartbeat_interval_s=args.heartbeat_interval,
            heartbeat_timeout_s=args.heartbeat_timeout,
            barrier_timeout_s=args.barrier_timeout,
            engine_timeout_s=args.engine_timeout,
            hwm=args.hwm,
            backlog_limit=args.backlog,
            allow_remote=remote,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return TokenizerRouter(settings)


def _detok_router(args: argparse.Namespace) -> DetokenizerRouter:
    run_dir = _run_dir(args)
    defaults = (
        DetokenizerRouterEndpoints.in_run_dir(run_dir, args.detokenizers) if run_dir else None
    )
    remote = args.allow_remote
    targets = args.detokenizer_endpoint or (defaults.detokenizers if defaults else None)
    if not targets:
        raise UsageError("--detokenizer-endpoint is required without --run-dir")
    endpoints = DetokenizerRouterEndpoints(
        inbound=_endpoint(
            args.inbound_endpoint, defaults.inbound if defaults else None, "inbound", remote
        ),
        detokenizers=[_endpoint(t, None, "detokenizer", remote) for t in targets],
        control=_endpoint(
            args.control_endpoint, defaults.control if defaults else None, "control", remote
        ),
    )
    try:
        settings = DetokenizerRouterSettings(
            endpoints=endpoints,
            sticky_key=args.sticky_key,
            hwm=args.hwm,
            backlog_limit=args.backlog,
            allow_remote=remote,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return DetokenizerRouter(settings)


def _engine(args: argparse.Namespace) -> Service:
    from router_core.engine_link import EngineEndpoints, EngineLink
    from switchboard.engine import Scheduler, SchedulerConfig, text_token_pool
    from switchboard.engine.engine import BuiltinEngine
    from switchboard.text import TokenizerLoadError, load_tokenizer

    run_dir = _run_dir(args)
    defaults = EngineEndpoints.in_run_dir(run_dir, args.outputs_via) if run_dir else None
    remote = args.allow_remote
    endpoints = EngineEndpoints(
        **{
            field: _endpoint(
                getattr(args, f"{field}_endpoint"),
                getattr(defaults, field) if defaults else None,
                field,
                remote,
            )
            for field in ("inbound", "events", "outputs")
        }
    )
    try:
        tokenizer = load_tokenizer(args.tokenizer)
        pool = text_token_pool(tokenizer.vocab_size, tokenizer.decode, tokenizer.special_token_ids)
        config = SchedulerConfig(
            token_pool=pool,
            max_running_requests=args.max_running_requests,
            max_tokens_per_step=args.max_tokens_per_step,
            step_time_s=args.step_time,
            per_token_cost_s=args.per_token_cost,
            vocab_seed=args.vocab_seed,
            eos_token_id=tokenizer.eos_token_id,
        )
    except (TokenizerLoadError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    link = EngineLink(endpoints, hwm=args.hwm, backlog_limit=args.backlog, allow_remote=remote)
    scheduler = Scheduler(config, decode=tokenizer.decode)
    return BuiltinEngine(link, scheduler, load_interval_s=args.load_interval)


def _parse_ctl_args(pairs: Sequence[str]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"argument {pair!r}: expected key=value")
        try:
            parsed[key] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key] = raw
    return parsed


def _ctl(args: argparse.Namespace) -> int:
    with ControlClient(args.endpoint, timeout_s=args.timeout) as client:
        try:
            result = client.call(args.name, **_parse_ctl_args(args.args))
        except ControlError as exc:
            print(f"switchboard ctl: {exc}", file=sys.stderr)
            return 1
    print(json.dumps(msgspec.to_builtins(result), indent=2, sort_keys=True))
    return 0


def _serve(service: Service, args: argparse.Namespace, role: str = "") -> int:
    """Run a process's loop until signalled.

    A router (``role`` given) is traced as that role when ``OTEL_*`` says so; the engine
    and the detokenizers set up their own tracing in ``run``.
    """
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
    )
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    if role:
        tracing.setup(role, role)
    try:
        serve_until_signalled(service)
    finally:
        tracing.shutdown()
    return 0


#: Commands whose processes start often and never need ``up``'s flags.
_LIGHT_COMMANDS = frozenset(
    {"router", "detok-router", "engine", "detokenizer", "worker", "ctl", "admin"}
)

#: Operator commands that talk to the admin app over HTTP (``switchboard.admin_cli``).
ADMIN_COMMANDS = frozenset({"status", "workers", "pause", "continue", "drain", "undrain", "load"})


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``switchboard`` console script."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(
        with_up_flags=not words or words[0] not in _LIGHT_COMMANDS | ADMIN_COMMANDS
    )
    args = parser.parse_args(words)
    try:
        if args.command == "router":
            return _serve(_router(args), args, "tokenizer-router")
        if args.command == "detok-router":
            return _serve(_detok_router(args), args, "detokenizer-router")
        if args.command == "engine":
            return _serve(_engine(args), args)
        if args.command == "detokenizer":
            from switchboard.detokenizer.cli import build as build_detokenizer

            return _serve(build_detokenizer(args), args)
        if args.command == "worker":
            from switchboard.worker.cli import run as run_worker

            return run_worker(args)
        if args.command == "admin":
            from app.cli import run as run_admin

            return run_admin(args)
        if args.command in ADMIN_COMMANDS:
            from switchboard.admin_cli import run as run_admin_command

            return run_admin_command(args)
        if args.command == "up":
            from switchboard.supervisor.cli import run as run_up

            return run_up(args)
        if args.command == "ctl":
            return _ctl(args)
        if args.command == "bench" and args.suite == "e2e":
            from switchboard.bench.e2e import run_e2e_bench

            return run_e2e_bench(quick=args.quick, json_path=args.json_path)
        if args.command == "bench" and args.suite == "observability":
            from switchboard.bench.observability import run_observability_bench

            return run_observability_bench(quick=args.quick, json_path=args.json_path)
        if args.command == "bench":
            from switchboard.bench.router import run_router_bench

            return run_router_bench(quick=args.quick, json_path=args.json_path)
    except UsageError as exc:
        print(f"switchboard {args.command}: {exc}", file=sys.stderr)
        return 2
    except zmq.ZMQError as exc:
        print(f"switchboard {args.command}: {exc}", file=sys.stderr)
        return 1
    parser.error(f"unknown command {args.command}")  # exits


if __name__ == "__main__":
    raise SystemExit(main())
