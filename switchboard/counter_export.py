"""Drops, rejects and lost requests counted inside a process, exported to Prometheus by delta.

The engine link, the worker link and the detokenizers count what they drop or refuse in
a :class:`~router_core.counters.Counters` (``dropped`` and ``rejected``, by reason), as
the routers do; the routers' counts reach ``/metrics`` through their ``metrics``
command, these through ``prometheus_client``'s multiprocess files. :meth:`sync` is
called from the process's own loop about once a second and adds what each count grew
by since the last call, so the per-message path stays a dictionary update.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from router_core.counters import Counters

if TYPE_CHECKING:
    from prometheus_client import Counter

__all__ = ["EXPORTED", "SYNC_INTERVAL_S", "CounterExport"]

#: Counter name in :class:`Counters` -> the metric family it is exported as.
EXPORTED: Final = {
    "dropped": "switchboard_dropped_messages_total",
    "rejected": "switchboard_rejected_frames_total",
    "lost_requests": "switchboard_lost_requests_total",
    "resent_requests": "switchboard_resent_requests_total",
    "refused": "switchboard_refused_connections_total",
}
#: How often a process's loop should call :meth:`CounterExport.sync`.
SYNC_INTERVAL_S: Final = 1.0

_MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"


class CounterExport:
    """Exports one process's counts of :data:`EXPORTED` labelled ``process`` (its role);
    ``names`` picks which (a worker exports no ``dropped``: the rows it drops belong to
    requests whose client went away, which is no fault of the fabric); ``known`` names
    reasons whose series exist at 0 from the start.

    Records nothing, and imports nothing, unless ``PROMETHEUS_MULTIPROC_DIR`` is set
    (``switchboard up`` sets it with metrics on).
    """

    def __init__(
        self,
        process: str,
        names: tuple[str, ...] = tuple(EXPORTED),
        *,
        known: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        unknown = set(names) - set(EXPORTED) | set(known or {}) - set(names)
        if unknown:
            raise ValueError(f"cannot export {sorted(unknown)}; only {sorted(EXPORTED)}")
        self.process = process
        self._families: dict[str, Counter] | None = None
        if os.environ.get(_MULTIPROC_ENV):
            every = _families()
            self._families = {name: every[name] for name in names}
            # Known reasons exist from the start at 0, so a rate over them is defined
            # before the first fault rather than appearing with it.
            for name, reasons in (known or {}).items():
                for reason in reasons:
                    self._families[name].labels(process=process, reason=reason)
        #: What was exported so far, per (counter name, reason).
        self._exported: dict[tuple[str, str], int] = {}

    @property
    def enabled(self) -> bool:
        """Whether :meth:`sync` writes anything."""
        return self._families is not None

    def sync(self, counters: Counters) -> None:
        """Add to each exported series what its count grew by since the last call."""
        families = self._families
        if families is None:
            return
        snapshot = counters.snapshot()
        for name, family in families.items():
            for reason, value in snapshot.get(name, {}).items():
                key = (name, reason)
                grown = value - self._exported.get(key, 0)
                if grown > 0:
                    family.labels(process=self.process, reason=reason).inc(grown)
                    self._exported[key] = value


_FAMILIES: dict[str, Counter] = {}


def _families() -> dict[str, Counter]:
    """The two families, made once per process (a second set would share its files)."""
    if not _FAMILIES:
        from prometheus_client import Counter

        help_texts = {
            "dropped": "messages dropped (dead or unknown peer, full backlog, ...), by reason",
            "rejected": "inbound messages refused as malformed or unexpected, by reason",
            "lost_requests": "requests ended with an error because a fault lost them, by cause",
            "resent_requests": "requests sent again because the router they went to restarted",
            "refused": "connections and peers refused at the edge (CURVE key, gateway HELLO)",
        }
        for name, metric in EXPORTED.items():
            # registry=None: the admin app reads the multiprocess directory, not this process.
            _FAMILIES[name] = Counter(
                metric.removesuffix("_total"), help_texts[name], ["process", "reason"],
                registry=None,
            )  # fmt: skip
    return _FAMILIES
