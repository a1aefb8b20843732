"""Type-check dashboard JSON against ``@grafana/schema`` with the TypeScript compiler:
``python -m dashboards.tscheck [FILE.json ...]`` (default: every committed dashboard).

Each dashboard becomes a ``.ts`` module ``import type { Dashboard } from '@grafana/schema';
export const d: FromJson<Dashboard> = <json>;`` in a temporary directory (``FromJson``
lets JSON strings stand for string-enum members; see :func:`typescript_module`), and one
``tsc --noEmit --strict --skipLibCheck --moduleResolution bundler --module esnext`` run
checks them all.
As an object literal assigned to a typed constant, each dashboard gets TypeScript's
excess-property check too, so a misspelt key of a typed object is caught, not only a
wrong type.

The compiler and the schema come from ``dashboards/typecheck/node_modules``, pinned by
its ``package-lock.json``; install them with ``npm ci --prefix dashboards/typecheck``.
:func:`missing_toolchain` says what is missing, so a caller can skip (or, in CI, fail).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from dashboards import JSON_DIR, REPO_ROOT

__all__ = ["TSC_FLAGS", "TYPECHECK_DIR", "missing_toolchain", "typecheck", "typescript_module"]

#: The npm project pinning typescript and @grafana/schema.
TYPECHECK_DIR = REPO_ROOT / "dashboards" / "typecheck"
TSC_FLAGS: tuple[str, ...] = (
    "--noEmit",
    "--strict",
    "--skipLibCheck",
    "--moduleResolution",
    "bundler",
    "--module",
    "esnext",
    "--target",
    "es2020",
    "--pretty",
    "false",
)
#: The seconds one tsc run may take (it takes ~2 s for the three dashboards).
TSC_TIMEOUT_S = 120.0


def _tsc_script(typecheck_dir: Path) -> Path:
    return typecheck_dir / "node_modules" / "typescript" / "bin" / "tsc"


def missing_toolchain(typecheck_dir: Path = TYPECHECK_DIR) -> str | None:
    """Why the type check cannot run here (``None`` when it can)."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not _tsc_script(typecheck_dir).is_file():
        return f"typescript is not installed: run npm ci --prefix {typecheck_dir}"
    if not (typecheck_dir / "node_modules" / "@grafana" / "schema" / "package.json").is_file():
        return f"@grafana/schema is not installed: run npm ci --prefix {typecheck_dir}"
    return None


#: ``Dashboard`` as JSON can spell it. A TypeScript string enum (``ThresholdsMode``,
#: ``MappingType``, …) is nominal: no string literal is assignable to it, so JSON could
#: never satisfy ``Dashboard`` itself. ``FromJson`` swaps each string enum for the union of
#: its values (``${E}``) and keeps everything else (required keys, excess-property checks,
#: numeric enums, which accept their literal values) as the schema has it.
_FROM_JSON = (
    "type FromJson<T> = T extends string ? `${T}`\n"
    "  : T extends readonly (infer U)[] ? FromJson<U>[]\n"
    "  : T extends object ? { [K in keyof T]: FromJson<T[K]> }\n"
    "  : T;\n"
)


def typescript_module(dashboard_json: str) -> str:
    """The TypeScript module that types ``dashboard_json`` as a ``Dashboard`` (with string
    enums spelt as their values, as JSON has them)."""
    return (
        "import type { Dashboard } from '@grafana/schema';\n"
        f"{_FROM_JSON}"
        f"export const d: FromJson<Dashboard> = {dashboard_json.strip()};\n"
    )


def typecheck(
    json_paths: Sequence[Path], typecheck_dir: Path = TYPECHECK_DIR
) -> subprocess.CompletedProcess[str]:
    """Run one ``tsc`` over every dashboard in ``json_paths``; its completed process
    (return code 0 and empty output when every dashboard type-checks). Diagnostics name
    the ``.ts`` file, which is named after the JSON file."""
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is not installed")
    with tempfile.TemporaryDirectory(prefix="sb-dash-tsc-") as tmp:
        work = Path(tmp)
        # Module resolution walks up from each file: the link makes the pinned packages
        # visible without writing anything into the checkout.
        (work / "node_modules").symlink_to(typecheck_dir / "node_modules")
        sources = []
        for path in json_paths:
            source = work / f"{path.stem}.ts"
            source.write_text(typescript_module(path.read_text(encoding="utf-8")), "utf-8")
            sources.append(str(source))
        command = [node, str(_tsc_script(typecheck_dir)), *TSC_FLAGS, *sources]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=TSC_TIMEOUT_S, check=False
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns tsc's exit status (2 when the toolchain is missing)."""
    args = list(sys.argv[1:] if argv is None else argv)
    paths = [Path(arg) for arg in args] or sorted(JSON_DIR.glob("*.json"))
    reason = missing_toolchain()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    result = typecheck(paths)
    sys.stdout.write(result.stdout + result.stderr)
    if result.returncode == 0:
        print(f"{len(paths)} dashboards type-check against @grafana/schema")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
