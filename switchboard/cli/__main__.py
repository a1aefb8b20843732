"""``python -m switchboard.cli``: the ``switchboard`` command (how the supervisor starts
its children, with its own interpreter)."""

from switchboard.cli import main

raise SystemExit(main())
