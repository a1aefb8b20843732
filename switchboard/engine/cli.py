"""``switchboard engine``: the engine's flags, and running it.

``--backend sim`` (the default) is the simulated engine, whose scheduler flags come from
:class:`~switchboard.engine.scheduler.SchedulerConfig`; ``--backend llama-cpp --model
PATH.gguf`` serves a real model through llama.cpp, with the flags of
:class:`~switchboard.engine.llama_cpp.config.LlamaConfig` (``--max-waiting-requests`` is
both backends'). A flag of the other backend given a value is refused, never ignored.
The link's endpoints default to the run directory's layout, each overridable.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from router_core.engine_link import EngineEndpoints

if TYPE_CHECKING:
    from router_core.engine_link import EngineLink
from switchboard.cli.flags import add_settings_flags, settings_values
from switchboard.cli.support import (
    UsageError,
    add_common_flags,
    add_outputs_via_flag,
    checked_endpoint,
    positive_float,
    run_dir,
    serve,
    stack_key,
    tokenizer_flag,
)
from switchboard.engine.engine import DEFAULT_LOAD_INTERVAL_S
from switchboard.engine.llama_cpp.config import LlamaConfig
from switchboard.engine.scheduler import SchedulerConfig

__all__ = ["BACKENDS", "add_parser", "run"]

#: ``--backend`` values: the simulated engine and llama.cpp.
BACKENDS = ("sim", "llama-cpp")
#: Simulated-engine settings with no meaning to llama.cpp (their flags are refused there).
_SIM_ONLY = (
    "max_running_requests",
    "max_tokens_per_step",
    "step_time_s",
    "per_token_cost_s",
    "vocab_seed",
)

#: The link's endpoint fields, each a ``--<field>-endpoint`` flag.
_ENDPOINTS = {
    "inbound": "PULL bound for requests",
    "events": "the router's engine-events PULL",
    "outputs": "where batched outputs go",
}


def add_parser(sub: Any) -> None:
    """Add the ``engine`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "engine", help="run the engine: the built-in simulation, or a GGUF model with llama.cpp"
    )
    add_common_flags(parser)
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="sim",
        help="sim: the simulated engine; llama-cpp: the --model GGUF file through llama.cpp "
        "(needs the llama extra) (default %(default)s)",
    )
    parser.add_argument(
        "--model", metavar="PATH", help="the GGUF model file (--backend llama-cpp) (default: none)"
    )
    for field, help_text in _ENDPOINTS.items():
        parser.add_argument(f"--{field}-endpoint", help=f"{help_text} (default: in --run-dir)")
    add_outputs_via_flag(
        parser,
        "where the default outputs endpoint is: direct, the detokenizer router's inbound; "
        "router, the tokenizer router's outputs",
    )
    add_settings_flags(parser, SchedulerConfig)
    add_settings_flags(parser, LlamaConfig)
    parser.add_argument(
        "--tokenizer",
        help="the simulated engine's tokenizer.json or model directory (default: built in)",
    )
    parser.add_argument(
        "--load-interval-s",
        "--load-interval",
        dest="load_interval_s",
        type=positive_float,
        default=DEFAULT_LOAD_INTERVAL_S,
        metavar="S",
        help="seconds between load reports (default %(default)s)",
    )


def _endpoints(args: argparse.Namespace, directory: str | None) -> EngineEndpoints:
    defaults = EngineEndpoints.in_run_dir(directory, args.outputs_via) if directory else None
    return EngineEndpoints(
        **{
            field: checked_endpoint(
                getattr(args, f"{field}_endpoint"),
                getattr(defaults, field) if defaults else None,
                f"--{field}-endpoint",
                allow_remote=args.allow_remote,
            )
            for field in _ENDPOINTS
        }
    )


def _given(args: argparse.Namespace, settings_class: type, names: tuple[str, ...]) -> list[str]:
    """The flags among ``names`` whose value differs from the field's default."""
    defaults = {field.name: field.default for field in dataclasses.fields(settings_class)}
    return [
        "--" + name.replace("_", "-") for name in names if getattr(args, name) != defaults[name]
    ]


def run(args: argparse.Namespace) -> int:
    """Serve the engine until SIGTERM; :class:`UsageError` for a bad setting."""
    if args.backend == "llama-cpp":
        return _run_llama(args)
    llama_only = _given(args, LlamaConfig, ("context_size", "batch_size", "sequences", "threads"))
    if args.model or llama_only:
        flags = ", ".join(([] if not args.model else ["--model"]) + llama_only)
        raise UsageError(f"{flags}: only for --backend llama-cpp")
    return _run_sim(args)


def _link(args: argparse.Namespace) -> EngineLink:
    from router_core.engine_link import EngineLink

    directory = run_dir(args)
    return EngineLink(
        _endpoints(args, directory),
        hwm=args.hwm,
        backlog_limit=args.backlog,
        allow_remote=args.allow_remote,
        key=stack_key(args, directory),
    )


def _run_llama(args: argparse.Namespace) -> int:
    from switchboard.engine.engine import BuiltinEngine
    from switchboard.engine.llama_cpp.model_file import ModelFileError
    from switchboard.engine.llama_cpp.runtime import LlamaRuntime
    from switchboard.engine.llama_cpp.scheduler import LlamaScheduler
    from switchboard.text.llama_runtime import LlamaUnavailable

    sim_only = _given(args, SchedulerConfig, _SIM_ONLY)
    if sim_only:
        raise UsageError(f"{', '.join(sim_only)}: only for --backend sim")
    if args.tokenizer:
        raise UsageError("--tokenizer: only for --backend sim (llama.cpp uses the model's own)")
    if not args.model:
        raise UsageError("--backend llama-cpp needs --model PATH.gguf")
    try:
        config = LlamaConfig(
            max_waiting_requests=args.max_waiting_requests, **settings_values(args, LlamaConfig)
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    link = _link(args)  # endpoints checked before the model loads
    try:
        runtime = LlamaRuntime(args.model, config)
    except (ModelFileError, LlamaUnavailable) as exc:
        raise UsageError(str(exc)) from exc
    scheduler = LlamaScheduler(runtime, config)
    engine = BuiltinEngine(
        link, scheduler, load_interval_s=args.load_interval_s, name="llama-cpp engine"
    )
    try:
        return serve(engine, args)
    finally:
        scheduler.close()
        runtime.close()


def _run_sim(args: argparse.Namespace) -> int:
    from switchboard.engine import Scheduler, text_token_pool
    from switchboard.engine.engine import BuiltinEngine

    tokenizer = tokenizer_flag(args)
    try:
        pool = text_token_pool(tokenizer.vocab_size, tokenizer.decode, tokenizer.special_token_ids)
        config = SchedulerConfig(
            token_pool=pool,
            eos_token_id=tokenizer.eos_token_id,
            **settings_values(args, SchedulerConfig),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    scheduler = Scheduler(config, decode=tokenizer.decode)
    return serve(BuiltinEngine(_link(args), scheduler, load_interval_s=args.load_interval_s), args)
