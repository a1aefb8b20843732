"""What the worker does with the body fields it ignored (``body_base``'s unknown-field
policy): count each in ``switchboard_ignored_fields_total`` and log each new name once.

Field names come from clients, so the label values are bounded: the first
:data:`MAX_FIELD_NAMES` distinct names get their own ``field`` value, later ones are
counted as ``other`` (and logged once, together, when the bound is reached).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from switchboard.worker.metrics import Metrics

__all__ = ["MAX_FIELD_NAMES", "OTHER", "IgnoredFields"]

logger = logging.getLogger(__name__)

#: Distinct field names with their own label value, per worker process.
MAX_FIELD_NAMES: Final = 64
#: The label value of every field name past the bound.
OTHER: Final = "other"
#: Longest field name shown in a label or a log line.
_MAX_NAME_CHARS: Final = 80


class IgnoredFields:
    """One worker's record of ignored fields, reporting to ``metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._names: set[str] = set()
        self._full_logged = False

    def report(self, handler: str, names: Iterable[str]) -> None:
        """A request to ``handler`` (its route template) held the ignored ``names``."""
        for raw in names:
            name = raw[:_MAX_NAME_CHARS]
            if name not in self._names:
                if len(self._names) >= MAX_FIELD_NAMES:
                    self._log_full()
                    name = OTHER
                else:
                    self._names.add(name)
                    logger.info(
                        "ignored the unknown body field %r of %s (set reject_unknown_fields "
                        "to refuse such fields); each new field name is logged once",
                        name,
                        handler,
                    )
            self.metrics.ignored_field(handler, name)

    def _log_full(self) -> None:
        if not self._full_logged:
            self._full_logged = True
            logger.warning(
                "%d distinct unknown body fields ignored; further names are counted as %r "
                "and not logged",
                MAX_FIELD_NAMES,
                OTHER,
            )
