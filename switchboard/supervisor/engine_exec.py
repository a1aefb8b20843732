"""Start a user's engine command so that it dies with the supervisor.

``python -m switchboard.supervisor.engine_exec PARENT_PID -- WORD...`` asks the kernel
to SIGKILL this process when its parent dies (Linux's parent-death signal, which
survives ``exec``), exits at once if the parent is already gone, and then replaces
itself with the command: the engine keeps this process's pid, so the supervisor watches
and signals the engine itself. An engine that cannot be run ends with one line naming
it and exit status 127, as a shell's "command not found" does.

Only the standard library is imported: this runs before every engine start.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
#: The shell's status for a command that cannot be found or run.
CANNOT_RUN = 127


def main(argv: list[str]) -> int:
    """Exec ``argv``'s command (returns only when it cannot be run)."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: engine_exec PARENT_PID -- WORD...", file=sys.stderr)
        return 2
    parent, words = int(argv[0]), argv[2:]
    if sys.platform.startswith("linux"):
        # SIGKILL: an engine of any language, whatever it does with SIGTERM, must not
        # outlive a supervisor that was itself killed.
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        print(f"engine command not started: supervisor {parent} is gone", file=sys.stderr)
        return 1
    sys.stdout.flush()
    try:
        # The operator's own command, run as the words they gave: no shell by design.
        os.execvp(words[0], words)  # noqa: S606
    except OSError as exc:
        print(f"cannot run the engine command {words[0]!r}: {exc.strerror}", file=sys.stderr)
    return CANNOT_RUN


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
