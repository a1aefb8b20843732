"""``switchboard models``: write a generated GGUF model (``demo``, ``build``).

``demo`` writes the tiny model on Switchboard's built-in vocabulary, which needs
nothing from outside, to ``./switchboard-demo.gguf``; ``build`` writes either size on
any GGUF file's vocabulary to the model cache (content-keyed, reused when present).
``--out`` and ``--cache`` choose the other place. Both print the path and the command
that serves the model. The parser loads no numpy or gguf: only running
a command does, and without the ``llama`` extra that is one line, exit 2.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any, Final

from switchboard.cli.support import UsageError
from switchboard.models.spec import SPECS, TINY, ModelSpec

__all__ = ["DEFAULT_DEMO_PATH", "add_parser", "run"]

#: Where ``switchboard models demo`` writes the model unless told otherwise.
DEFAULT_DEMO_PATH: Final = Path("switchboard-demo.gguf")

_ACTIONS: Final = ("demo", "build")

_CACHE_HELP: Final = (
    "model cache directory (default: $SWITCHBOARD_CACHE_DIR/models, else "
    "$XDG_CACHE_HOME/switchboard/models, else ~/.cache/switchboard/models)"
)


def add_parser(sub: Any) -> None:
    """Add the ``models`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "models", help="write a generated GGUF model (demo, tests, benchmarks)"
    )
    parser.add_argument(
        "action",
        choices=_ACTIONS,
        help="demo: the tiny model on the built-in vocabulary; build: any size and vocabulary",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help=f"file to write (default: ./{DEFAULT_DEMO_PATH} for demo, the model cache for build)",
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="write to the model cache instead of a file (reused when already there)",
    )
    parser.add_argument("--cache-dir", type=Path, metavar="DIR", help=_CACHE_HELP)
    parser.add_argument(
        "--size",
        choices=sorted(SPECS),
        help=f"build: tiny for tests, bench for benchmarks (default: {TINY.name})",
    )
    parser.add_argument(
        "--vocab",
        type=Path,
        metavar="PATH.gguf",
        help="build: GGUF file whose tokenizer the model gets (default: the built-in vocabulary)",
    )


def _checked_out(path: Path) -> Path:
    """``--out`` made absolute; :class:`UsageError` unless its directory exists."""
    target = path.expanduser().absolute()
    if target.is_dir():
        raise UsageError(f"--out {path}: is a directory")
    if not target.parent.is_dir():
        raise UsageError(f"--out {path}: no such directory {target.parent}")
    return target


def _checked_vocab(path: Path) -> Path:
    if not path.is_file():
        raise UsageError(f"--vocab {path}: no such file")
    return path


def _write(spec: ModelSpec, vocab_path: Path | None, out: Path | None, cache: Path | None) -> Path:
    """Write the model where asked (``out``, else the cache) and return its path."""
    try:
        from switchboard.models.builder import build_model, write_model
        from switchboard.models.builtin_vocab import BuiltinVocab
        from switchboard.models.vocab import GGUFVocab, VocabError, VocabSource
    except ImportError as exc:
        raise UsageError(f"needs the llama extra, {exc.name} is missing (make llama)") from exc
    source: VocabSource = GGUFVocab(vocab_path) if vocab_path is not None else BuiltinVocab()
    flag = f"--vocab {vocab_path}: " if vocab_path is not None else ""
    path_prefix = f"{vocab_path}: "
    target = out if out is not None else cache
    try:
        if out is None:
            return build_model(spec, source, cache)
        write_model(spec, source.load(), out, name=f"switchboard-{spec.name}-{source.name}")
        return out
    except VocabError as exc:
        # A GGUFVocab's message starts with its path, which the flag already names.
        raise UsageError(f"{flag}{str(exc).removeprefix(path_prefix)}") from exc
    except OSError as exc:
        raise UsageError(
            f"cannot write {target or 'the model cache'}: {exc.strerror or exc}"
        ) from exc


def _report(spec: ModelSpec, path: Path) -> None:
    megabytes = path.stat().st_size / 1e6
    print(f"model: {path} ({spec.name}, {megabytes:.1f} MB)")
    print(f"serve it: switchboard up --engine llama-cpp --model {shlex.quote(str(path))}")


def run(args: argparse.Namespace) -> int:
    """Write the model the action asks for, print its path and how to serve it;
    :class:`UsageError` for flags that do not go together."""
    if args.cache and args.out is not None:
        raise UsageError("--out and --cache: give one (where the model goes)")
    if args.action == "demo":
        for flag in ("size", "vocab"):
            if getattr(args, flag) is not None:
                raise UsageError(f"--{flag} is for build; demo is the tiny built-in model")
    spec = SPECS[args.size or TINY.name]
    vocab = _checked_vocab(args.vocab) if args.vocab is not None else None
    default_out = DEFAULT_DEMO_PATH if args.action == "demo" and not args.cache else None
    out_flag = args.out if args.out is not None else default_out
    out = _checked_out(out_flag) if out_flag is not None else None
    cache = args.cache_dir.expanduser().absolute() if args.cache_dir is not None else None
    _report(spec, _write(spec, vocab, out, cache))
    return 0
