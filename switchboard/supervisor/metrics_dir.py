"""The stack's Prometheus multiprocess directory, ``<run dir>/metrics``.

Workers, the engine and the detokenizers write their ``prometheus_client`` values there,
one file per process and kind (``PROMETHEUS_MULTIPROC_DIR``); the admin app aggregates it at scrape
time. The supervisor owns its life: :meth:`MetricsDirectory.prepare` wipes and makes it
before any child starts (files of an earlier run would add in), :meth:`~MetricsDirectory.retire`
runs as soon as a child exits (before it is restarted), and :meth:`~MetricsDirectory.remove`
deletes it when the stack stops.

Retiring a dead process keeps the directory bounded by the processes alive, not by the
restarts. Its live gauges go (``mark_process_dead``), so a killed worker's in-flight
value leaves no stale series. Its counters, histograms, summaries and min / max / sum /
mostrecent gauges are *folded*: added into one archive file per kind,
``<kind>_archive.db``, which ``MultiProcessCollector`` reads like any other (it takes
the kind from the name before the first ``_``, a gauge's mode from the second field, and
drops the pid field for everything but ``all`` gauges), and the dead process's files are
deleted. Each folded value is merged as the collector merges it (a sum, or the min, the
max, the most recent by timestamp), keyed by the file's own key (the JSON of metric,
sample, labels and help), so every exposed total is the same after a fold as before,
and a counter never goes backwards. ``all`` gauges name their process in a ``pid``
label: a dead process's are retired with it, like its live ones.

A fold holds an exclusive ``flock`` on the directory itself (opened read-only); a reader
that holds it shared while it reads (:meth:`MetricsDirectory.reading`) never sees a
value counted twice or not at all. Each archive is replaced atomically (``os.replace``),
so even a reader without the lock never reads half an archive; it can, for the moment
between the archive's replacement and the dead file's deletion, count that file twice.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = [
    "ARCHIVE",
    "FOLDED_KINDS",
    "MULTIPROC_ENV",
    "RETIRED_KINDS",
    "MetricsDirectory",
    "fold_entries",
]

log = logging.getLogger("switchboard.supervisor")

#: The variable prometheus_client reads at import for its multiprocess directory.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: The pid field of archive files: ``counter_archive.db``, ``gauge_max_archive.db``, ...
ARCHIVE: Final = "archive"

#: How each file kind (the name before ``_<pid>.db``) is merged across processes, as
#: ``MultiProcessCollector`` merges it.
FOLDED_KINDS: Final = {
    "counter": "sum",
    "histogram": "sum",
    "summary": "sum",
    "gauge_sum": "sum",
    "gauge_min": "min",
    "gauge_max": "max",
    "gauge_mostrecent": "mostrecent",
}

#: Kinds a dead process's files are simply deleted for: gauges of one process only (the
#: ``live`` modes, which ``mark_process_dead`` removes too, and ``all``, labelled by pid).
RETIRED_KINDS: Final = frozenset(
    f"gauge_{mode}"
    for mode in ("all", "liveall", "livesum", "livemin", "livemax", "livemostrecent")
)

#: One value of a multiprocess file: its key, value and timestamp.
Entry = tuple[str, float, float]


def fold_entries(kind: str, entries: Iterable[Entry]) -> dict[str, tuple[float, float]]:
    """``entries`` of files of ``kind`` merged into one (value, timestamp) per key, as
    the collector would merge them. ``KeyError`` for a kind that is not folded."""
    rule = FOLDED_KINDS[kind]
    merged: dict[str, tuple[float, float]] = {}
    for key, value, timestamp in entries:
        seen = merged.get(key)
        if seen is None:
            merged[key] = (value, timestamp)
        elif rule == "sum":
            merged[key] = (seen[0] + value, max(seen[1], timestamp))
        elif rule == "min":
            merged[key] = (min(seen[0], value), max(seen[1], timestamp))
        elif rule == "max":
            merged[key] = (max(seen[0], value), max(seen[1], timestamp))
        elif timestamp > seen[1]:  # mostrecent: the later write wins
            merged[key] = (value, timestamp)
    return merged


def _valid_key(key: str) -> bool:
    """Whether the collector can parse ``key`` (a JSON list of metric, sample, labels, help)."""
    try:
        parsed = json.loads(key)
    except ValueError:
        return False
    return isinstance(parsed, list) and len(parsed) == 4 and isinstance(parsed[2], dict)


def _read_entries(path: Path) -> list[Entry]:
    """What ``path`` holds; a file cut short or corrupt gives what precedes the damage."""
    from prometheus_client.mmap_dict import MmapedDict

    entries: list[Entry] = []
    try:
        values = MmapedDict.read_all_values_from_file(str(path))  # type: ignore[no-untyped-call]
        for key, value, timestamp, _ in values:
            if _valid_key(key):
                entries.append((key, value, timestamp))
            else:
                log.warning("metrics file %s: skipping an unreadable key", path.name)
    except (RuntimeError, struct.error, UnicodeDecodeError) as exc:
        log.warning("metrics file %s is damaged (%s); folding what precedes it", path.name, exc)
    return entries


def _write_atomically(path: Path, merged: dict[str, tuple[float, float]]) -> None:
    """Write ``merged`` as a multiprocess file at ``path``, replacing it in one step."""
    from prometheus_client.mmap_dict import MmapedDict

    temporary = path.with_name(f".{path.name}.tmp")  # not *.db: no reader globs it
    temporary.unlink(missing_ok=True)
    # prometheus_client 0.26 leaves MmapedDict untyped.
    archive = MmapedDict(str(temporary))  # type: ignore[no-untyped-call]
    try:
        for key, (value, timestamp) in merged.items():
            archive.write_value(key, value, timestamp)  # type: ignore[no-untyped-call]
    finally:
        archive.close()  # type: ignore[no-untyped-call]
    os.replace(temporary, path)


class MetricsDirectory:
    """``path``, wiped at :meth:`prepare`, dead processes folded at :meth:`retire`,
    removed at :meth:`remove`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def prepare(self) -> Path:
        """An empty directory at :attr:`path` (mode 0700); ``OSError`` if it cannot be made."""
        if self.path.is_dir() and not self.path.is_symlink():
            shutil.rmtree(self.path)
        else:
            self.path.unlink(missing_ok=True)
        self.path.mkdir(mode=0o700, parents=True)
        return self.path

    @contextmanager
    def _locked(self, operation: int) -> Iterator[None]:
        descriptor = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, operation)
            yield
        finally:
            os.close(descriptor)  # releases the lock

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the directory still for a reader: no fold runs until the block ends (a
        shared ``flock`` on the directory, as any reader may take it)."""
        with self._locked(fcntl.LOCK_SH):
            yield

    def retire(self, pid: int) -> None:
        """Retire process ``pid``, which has exited: drop its live and ``all`` gauges,
        fold the rest of its files into the archives and delete them. Never raises (an
        ``OSError`` is logged and what is left stays as it was)."""
        from prometheus_client.multiprocess import mark_process_dead

        try:
            with self._locked(fcntl.LOCK_EX):
                mark_process_dead(pid, str(self.path))  # type: ignore[no-untyped-call]  # 0.26
                self._fold(pid)
        except OSError as exc:
            log.warning("cannot retire the metrics of pid %d: %s", pid, exc)

    def _fold(self, pid: int) -> None:
        suffix = f"_{pid}.db"
        for dead in sorted(self.path.glob(f"*{suffix}")):
            kind = dead.name[: -len(suffix)]
            if kind in FOLDED_KINDS:
                archive = self.path / f"{kind}_{ARCHIVE}.db"
                entries = _read_entries(dead)
                if archive.exists():
                    entries = _read_entries(archive) + entries
                _write_atomically(archive, fold_entries(kind, entries))
            elif kind not in RETIRED_KINDS:
                log.warning("metrics file %s is of no kind known here; kept", dead.name)
                continue
            dead.unlink()

    def files(self) -> list[Path]:
        """The ``*.db`` files a reader would read now (the archives among them)."""
        return sorted(self.path.glob("*.db"))

    def remove(self) -> None:
        """Delete the directory and every file in it (nothing if it is not there)."""
        if self.path.is_dir() and not self.path.is_symlink():
            shutil.rmtree(self.path, ignore_errors=True)
