"""Generate the committed dashboard JSON: ``python -m dashboards.build [--check] [--out DIR]``.

Without ``--check`` it writes ``<uid>.json`` for every dashboard into ``DIR`` (default
``dashboards/json``) and removes JSON files there that no dashboard produces. With
``--check`` it writes nothing and exits 1 when a file is missing, stale or extra, naming
each, so CI catches a dashboard changed in code but not regenerated (or edited by hand).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dashboards import JSON_DIR
from dashboards.render import render_all

__all__ = ["differences", "main", "write"]


def differences(out_dir: Path, rendered: dict[str, str]) -> list[str]:
    """Human-readable differences between ``out_dir`` and ``rendered`` (empty: in sync)."""
    found = []
    on_disk = {path.name for path in out_dir.glob("*.json")}
    for name, text in sorted(rendered.items()):
        path = out_dir / name
        if name not in on_disk:
            found.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != text:
            found.append(f"{path}: differs from what the code generates")
    found.extend(
        f"{out_dir / name}: no dashboard generates it" for name in sorted(on_disk - set(rendered))
    )
    return found


def write(out_dir: Path, rendered: dict[str, str]) -> list[Path]:
    """Write ``rendered`` into ``out_dir`` (removing stray JSON); the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stray in set(out_dir.glob("*.json")) - {out_dir / name for name in rendered}:
        stray.unlink()
    written = []
    for name, text in sorted(rendered.items()):
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m dashboards.build", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the JSON is stale")
    parser.add_argument("--out", type=Path, default=JSON_DIR, help="output directory")
    args = parser.parse_args(argv)
    rendered = render_all()
    if args.check:
        problems = differences(args.out, rendered)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("regenerate with: python -m dashboards.build", file=sys.stderr)
            return 1
        print(f"{len(rendered)} dashboards up to date in {args.out}")
        return 0
    for path in write(args.out, rendered):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
