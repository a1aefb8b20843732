"""Who may speak to the tokenizer router: the stack key, and refusing everyone else.

A router with a stack key (:mod:`router_core.credentials`) accepts a registration, an
engine acknowledgement or load snapshot, and an output-path beacon only when it carries
that key; a worker's later messages carry the secret of its registration instead
(checked by the registration handler against the worker's record). A router without a
key accepts those without one: its peers are not authenticated (it says so once, at
start).

Every refusal goes through :meth:`PeerCheck.refuse`: it is counted under ``rejected``
with its reason, and logged at most once per reason per :data:`LOG_INTERVAL_S`, the
sender's claimed name escaped (:func:`router_core.identifiers.shown`), so a flood of
forgeries neither fills the log nor writes lines of its own into it. Pure: time comes
in as an :class:`Instant`.
"""

from __future__ import annotations

import logging
from typing import Final

from router_core.counters import Counters
from router_core.credentials import matches
from router_core.identifiers import shown
from router_core.tokenizer_router.effects import Effect, Instant

__all__ = ["LOG_INTERVAL_S", "REFUSALS", "PeerCheck"]

logger = logging.getLogger(__name__)

#: Seconds between two log lines about refusals of one reason.
LOG_INTERVAL_S: Final = 10.0

#: The ``rejected`` reasons of refused peers, and what each means.
REFUSALS: Final = {
    "bad_key": "a registration without the stack key",
    "bad_secret": "a heartbeat, acknowledgement or deregistration without the secret of "
    "the named worker's registration",
    "bad_engine_key": "an engine acknowledgement or load snapshot without the stack key",
    "bad_upstream_key": "an output-path beacon without the stack key",
    "bad_worker_id": "a worker id that breaks the identifier rule, or 'engine'",
    "bad_host": "a registration whose host is not short printable text",
    "bad_version": "a registration whose version is not short printable text",
}


class PeerCheck:
    """The router's stack key (None: none) and its rate-limited refusals."""

    def __init__(
        self, key: str | None, counters: Counters, *, log_interval_s: float = LOG_INTERVAL_S
    ) -> None:
        self._key = key
        self._counters = counters
        self._log_interval_s = log_interval_s
        #: Per reason: when its last line was logged, and refusals not logged since.
        self._logged_at: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    @property
    def authenticated(self) -> bool:
        """Whether this router has a key (so peers must present it)."""
        return self._key is not None

    def has_key(self, given: str) -> bool:
        """Whether ``given`` is the stack key (always, for a router without one)."""
        return self._key is None or matches(given, self._key)

    def refuse(self, reason: str, claimed: str, at: Instant) -> list[Effect]:
        """Count a refused message under ``rejected{reason}`` and log it (rate-limited);
        ``claimed`` is the name the sender gave. Returns no effects, for the handler to
        return."""
        self._counters.add("rejected", reason)
        last = self._logged_at.get(reason)
        if last is not None and at.mono - last < self._log_interval_s:
            self._unlogged[reason] = self._unlogged.get(reason, 0) + 1
            return []
        self._logged_at[reason] = at.mono
        skipped = self._unlogged.pop(reason, 0)
        logger.warning(
            "refused a message from %s: %s (%s)%s",
            shown(claimed),
            reason,
            REFUSALS.get(reason, "refused"),
            f"; {skipped} more refused for this reason since the last line" if skipped else "",
        )
        return []
