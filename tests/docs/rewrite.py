"""What a doc writes for its machine, rewritten into what the test's machine has: pure.

A doc says ``localhost:8000``, ``/tmp/sb`` and ``export SWITCHBOARD_ADMIN_TOKEN=…``; the
test runs on free ports, in private temporary directories, with a token it was given.
A :class:`Rewrite` maps, in a command and in the output a doc shows alike:

* the documented ports (:data:`DOC_PORTS`) to the test's, as whole numbers only (``8000``
  in ``localhost:8000`` and ``--port 8000``, not in ``18000`` or ``8000.5``);
* ``/tmp/sb`` (the docs' run directory) and ``/tmp/switchboard-k2x9a1q0`` (one
  ``switchboard up`` made) to the stack's run directory, and any other
  ``/tmp/NAME``, or a path the marker lists in ``scratch=`` (whole: ``stack.toml`` but
  not ``my-stack.toml``), to the same name in the block's scratch directory;
* in commands only, a token placeholder (``…``, ``q8Zr…``) to the stack's token.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DOC_PORTS", "DOC_RUN_DIR", "Rewrite"]

#: The ports the docs use: workers, admin app, Prometheus, an OTLP receiver, the
#: workers' and admin app's in the examples of other ports (operating.md section 10), the
#: ports of operating.md's settings precedence example, and the worker gateway's two
#: (deploy.md; the test's has its next port free too).
DOC_PORTS = (8000, 8001, 9090, 4318, 9000, 9001, 9100, 9200, 7100, 7101)
#: The run directory the docs use for a stack started by hand.
DOC_RUN_DIR = "/tmp/sb"

_PORT = re.compile(r"(?<![\w.])(" + "|".join(map(str, DOC_PORTS)) + r")(?![\w]|\.\d)")
_TMP = re.compile(r"(?<![\w.-])/tmp/[\w.-]+")
_TOKEN = re.compile(r"[\w-]*…")
#: The temporary run directory switchboard up makes (mkdtemp), as a doc shows one.
_UP_RUN_DIR = re.compile(r"/tmp/switchboard-[a-z0-9_]{8}")


@dataclass(frozen=True)
class Rewrite:
    """The test's ports, directories and token, standing for the docs'."""

    ports: Mapping[int, int]
    run_dir: Path
    scratch: Path
    token: str = ""
    scratch_paths: Iterable[str] = field(default=())

    def _paths(self, text: str) -> str:
        # One pass, so that a path rewritten into the scratch directory (itself under
        # /tmp) is not rewritten again.
        listed = [re.escape(path.rstrip("/")) for path in self.scratch_paths if path]
        whole = [rf"(?<![\w./-]){path}(?![\w.-])" for path in listed]
        pattern = re.compile("|".join([*whole, _TMP.pattern]))

        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            if found == DOC_RUN_DIR or _UP_RUN_DIR.fullmatch(found):
                return str(self.run_dir)
            return str(self.scratch / found.strip("/").removeprefix("tmp/"))

        return pattern.sub(replace, text)

    def _ports(self, text: str) -> str:
        def port(match: re.Match[str]) -> str:
            documented = int(match.group(1))
            return str(self.ports.get(documented, documented))

        return _PORT.sub(port, text)

    def output(self, text: str) -> str:
        """Output a doc shows, as this machine would print it (volatile fields aside)."""
        return self._ports(self._paths(text))

    def command(self, text: str) -> str:
        """A command a doc shows, as it runs here."""
        text = self.output(text)
        return _TOKEN.sub(self.token, text) if self.token else text
