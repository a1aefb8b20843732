"""``switchboard vocab``: write the workers' vocabulary file for an engine's author.

The file (``switchboard-vocab/1``, docs/protocol.md "The vocabulary file") is what an
engine in any language reads to decode its own ids for stop strings and to know the
end-of-sequence ids. ``switchboard up`` writes it into the run dir for an engine command
(``SWITCHBOARD_VOCAB_FILE``); this command writes it anywhere, for a tokenizer given
as ``up`` would be given one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Add the ``vocab`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "vocab",
        help="write the workers' vocabulary file (for an engine's stop rules)",
        description="Write the vocabulary the workers tokenize with as one MessagePack map "
        "(format switchboard-vocab/1): every id's bytes, the EOS and end-of-generation ids, "
        "the special ids. See docs/protocol.md, 'The vocabulary file'.",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="tokenizer.json, model directory or GGUF file, as for switchboard up "
        "(default: the built-in tokenizer)",
    )
    parser.add_argument("--out", metavar="FILE", required=True, help="the file to write")


def run(args: argparse.Namespace) -> int:
    """Write the file; 0, or 1 with one line on stderr when it cannot be done."""
    from switchboard.text import TokenizerLoadError, load_tokenizer
    from switchboard.text.vocab_file import write_vocab_file

    try:
        codec = load_tokenizer(args.tokenizer)
    except TokenizerLoadError as exc:
        print(f"switchboard vocab: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out).expanduser()
    try:
        write_vocab_file(codec, out)
    except OSError as exc:
        print(f"switchboard vocab: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"{out}: {codec.vocab_size} ids from {codec.source}")
    return 0
