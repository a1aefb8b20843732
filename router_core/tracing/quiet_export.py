"""A quiet OTLP exporter: what a process logs while its collector is down.

The SDK's OTLP exporter logs a warning per retry and an error per lost batch, so with
the collector down every process logs both every few seconds. :class:`QuietSpanExporter`
wraps the exporter and keeps the SDK's own records made while a batch is being exported
(and the batch processor's "queue full" while export fails) out of the logs; it logs what
:class:`ExportHealth` says instead:

* one warning naming the endpoint and the reason when export first fails,
* while it keeps failing, a summary at most every :data:`SUMMARY_EVERY_S` (written when
  a batch fails, so an idle process that drops nothing writes none),
* one info line when a batch goes through again, with what the outage cost;
* at shutdown, one line with what was lost if the last batch failed. Queued spans get
  one try each at shutdown, no retry (:meth:`QuietSpanExporter.last_tries`), so a
  stopping process does not sit out the SDK's retries against a collector that is down.

:class:`ExportHealth` is the pure part (clocks passed in); the exporter around it owns
the logging. Spans dropped are counted in these lines only (no metric family).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "SUMMARY_EVERY_S",
    "ExportHealth",
    "QuietSpanExporter",
    "failure_reason",
    "quiet_exporter",
]

#: How often, at most, a process says its export is still failing.
SUMMARY_EVERY_S: Final = 60.0

#: Loggers the OTLP/HTTP exporter writes its per-attempt records to (the trace exporter
#: passes its own logger to the HTTP client; older SDKs log from the others).
_EXPORTER_LOGGERS: Final = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry.exporter.otlp.common.http",
)
#: Loggers the batch span processor says "queue full" on (newer and older SDKs).
_PROCESSOR_LOGGERS: Final = ("opentelemetry.sdk._shared_internal", "opentelemetry.sdk.trace.export")

_log: Final = logging.getLogger(__name__)

_ERRNO: Final = re.compile(r"\[Errno -?\d+\] ([^\"')\]]+)")
_STATUS: Final = re.compile(r"code: (\d+), reason: ([^,]*)")
_GAVE_UP: Final = re.compile(r"batch due to (.+?)\.?$")


def failure_reason(messages: Sequence[str]) -> str:
    """A short reason from what the SDK logged while one batch failed: the OS error
    (``Connection refused``), else ``HTTP <code> <reason>``, else why it gave up
    (``timeout, max retries or shutdown``: no retry was tried), else the first message."""
    for message in messages:
        if found := _ERRNO.search(message):
            return found.group(1).strip()
        if found := _STATUS.search(message):
            return f"HTTP {found.group(1)} {found.group(2).strip()}".strip()
    for message in messages:
        if found := _GAVE_UP.search(message):
            return found.group(1)
    if messages:
        return messages[0][:200]
    return "export failed"


def _utc(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


@dataclass
class _Outage:
    """What has been lost since export started failing."""

    since_wall: float
    reported_at: float
    reason: str
    batches: int = 0
    spans: int = 0
    queue_overflowed: bool = False

    def lost(self) -> str:
        lost = f"{self.batches} batches / {self.spans} spans dropped since {_utc(self.since_wall)}"
        if self.queue_overflowed:
            lost += " (the span queue overflowed too: spans it dropped are not counted)"
        return lost


class ExportHealth:
    """Export outcomes in, the lines to log out (``None``: log nothing). Pure."""

    def __init__(self, endpoint: str, *, summary_every_s: float = SUMMARY_EVERY_S) -> None:
        self.endpoint = endpoint
        self.summary_every_s = summary_every_s
        self._outage: _Outage | None = None

    @property
    def failing(self) -> bool:
        """Whether the last batch failed."""
        return self._outage is not None

    def failed(self, spans: int, reason: str, *, now: float, wall: float) -> str | None:
        """A batch of ``spans`` was dropped: the first failure's warning, a summary when
        ``summary_every_s`` has passed since the last line, else None."""
        outage = self._outage
        if outage is None:
            self._outage = _Outage(wall, now, reason, batches=1, spans=spans)
            return (
                f"OTLP export to {self.endpoint} failing ({reason}): spans are dropped "
                f"until it recovers; a summary follows every {self.summary_every_s:g} s "
                "while it fails"
            )
        outage.batches += 1
        outage.spans += spans
        outage.reason = reason
        if now - outage.reported_at < self.summary_every_s:
            return None
        outage.reported_at = now
        return f"OTLP export to {self.endpoint} still failing ({reason}): {outage.lost()}"

    def dropped(self, spans: int) -> None:
        """A batch of ``spans`` was dropped untried while export fails (at shutdown):
        counted in what the outage cost, nothing to log."""
        if self._outage is not None:
            self._outage.batches += 1
            self._outage.spans += spans

    def succeeded(self, *, wall: float) -> str | None:
        """A batch went through: the recovery line if export was failing, else None."""
        outage, self._outage = self._outage, None
        if outage is None:
            return None
        return f"OTLP export to {self.endpoint} recovered at {_utc(wall)}: {outage.lost()}"

    def queue_overflowed(self) -> bool:
        """The batch processor dropped spans: noted (and True: say nothing) while
        export fails; False otherwise, when the SDK's own warning is the news."""
        if self._outage is None:
            return False
        self._outage.queue_overflowed = True
        return True

    def closing(self) -> str | None:
        """At shutdown: what was lost if the last batch failed, else None (no batch may
        have been tried since, so it does not claim the collector is still down)."""
        if self._outage is None:
            return None
        return (
            f"OTLP export to {self.endpoint} at shutdown: {self._outage.lost()}, "
            "none exported since"
        )


class _SdkRecords(logging.Filter):
    """Keeps the SDK's export records out of the logs: those made on a thread inside
    :meth:`catching` are collected instead, and "queue full" ones while export fails."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()
        self.health: ExportHealth | None = None

    @contextlib.contextmanager
    def catching(self, on_record: Callable[[], None] | None = None) -> Iterator[list[str]]:
        """Collect (as messages) the records this thread makes on the exporter loggers,
        calling ``on_record`` after each; re-entrant (the outer collection resumes)."""
        caught: list[str] = []
        outer = getattr(self._local, "caught", None), getattr(self._local, "on_record", None)
        self._local.caught, self._local.on_record = caught, on_record
        try:
            yield caught
        finally:
            self._local.caught, self._local.on_record = outer

    def filter(self, record: logging.LogRecord) -> bool:
        caught: list[str] | None = getattr(self._local, "caught", None)
        if caught is not None:
            caught.append(record.getMessage())
            if (on_record := self._local.on_record) is not None:
                on_record()
            return False
        if record.name in _PROCESSOR_LOGGERS and "queue" in str(record.msg).lower():
            health = self.health
            return health is None or not health.queue_overflowed()
        return True

    def install(self) -> None:
        """Filter the SDK's loggers (once per process; idempotent)."""
        for name in (*_EXPORTER_LOGGERS, *_PROCESSOR_LOGGERS):
            logger = logging.getLogger(name)
            if self not in logger.filters:
                logger.addFilter(self)


#: One per process: filters stay on the SDK's loggers (harmless outside an export), so an
#: export still in flight after shutdown stays quiet too.
_SDK_RECORDS: Final = _SdkRecords()


class QuietSpanExporter(SpanExporter):
    """``inner`` with its failures logged as :class:`ExportHealth` says (see the module)."""

    def __init__(
        self,
        inner: SpanExporter,
        health: ExportHealth,
        *,
        records: _SdkRecords = _SDK_RECORDS,
        log: logging.Logger = _log,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.health = health
        self._records = records
        self._log = log
        self._clock = clock
        self._wall = wall
        self._shut = False
        self._final = False
        self._abandoned = False
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export through ``inner``; a raising exporter counts as a failed batch, and so
        does every batch once export is abandoned at shutdown (``inner`` is not asked)."""
        if self._abandoned:
            self.health.dropped(len(spans))
            return SpanExportResult.FAILURE
        with self._records.catching(on_record=self._on_sdk_record) as caught:
            try:
                result = self.inner.export(spans)
            except Exception as error:  # else the processor logs a traceback per batch
                caught.append(f"{type(error).__name__}: {error}")
                result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            if line := self.health.succeeded(wall=self._wall()):
                self._log.info("%s", line)
        elif line := self.health.failed(
            len(spans), failure_reason(caught), now=self._clock(), wall=self._wall()
        ):
            self._log.warning("%s", line)
        return result

    def last_tries(self) -> None:
        """Shutdown begins: the queued spans get one try each, no retry. While export is
        failing already, that try is skipped (the collector is known to be down) and an
        export retrying now ends at once; otherwise the first failed attempt ends it.
        The SDK would retry each batch for its whole timeout (10 s by default), so a
        stopping process would sit out its flush bound against a collector that is down."""
        self._final = True
        if self.health.failing:
            self._abandon()

    def _on_sdk_record(self) -> None:
        # The SDK logs on every failed attempt before it waits to retry: at shutdown, the
        # first one ends the export (shutting inner interrupts the SDK's backoff wait).
        if self._final:
            self._abandon()

    def _abandon(self) -> None:
        with self._lock:
            if self._abandoned:
                return
            self._abandoned = True
        with self._records.catching():
            self.inner.shutdown()

    def shutdown(self) -> None:
        """Shut ``inner`` down (once: a second call, or one after export was abandoned,
        does not) and say what was lost if the last batch failed."""
        if self._shut:
            return
        self._shut = True
        self._abandon()
        if line := self.health.closing():
            self._log.warning("%s", line)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """``inner``'s force_flush."""
        return self.inner.force_flush(timeout_millis)


def quiet_exporter(inner: SpanExporter, endpoint: str) -> QuietSpanExporter:
    """Wrap ``inner`` (exporting to ``endpoint``) and quiet the SDK's loggers for it."""
    health = ExportHealth(endpoint, summary_every_s=SUMMARY_EVERY_S)
    _SDK_RECORDS.health = health
    _SDK_RECORDS.install()
    return QuietSpanExporter(inner, health)
