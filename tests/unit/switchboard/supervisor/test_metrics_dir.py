"""The multiprocess metrics directory stays bounded across restarts: a dead process's files
are folded into one archive per kind that ``MultiProcessCollector`` reads, so the file
count follows the processes alive while every exposed total stays what it was. The files
are real ``prometheus_client`` writes of forked children that have exited."""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterable
from pathlib import Path

import pytest
from prometheus_client.core import Metric
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

from app.metrics.exposition import multiprocess_families
from switchboard.supervisor.metrics_dir import (
    ARCHIVE,
    FOLDED_KINDS,
    MetricsDirectory,
    fold_entries,
)

REPO_ROOT = Path(__file__).resolve().parents[4]

#: Forks one child per argument; each writes every kind of value, scaled by its argument,
#: and exits. Prints the children's pids. The parent itself records nothing.
_WRITERS = textwrap.dedent(
    """
    import os, sys, time
    from prometheus_client import Counter, Gauge, Histogram, Summary

    def write(n):
        requests = Counter("t_requests", "requests", ["worker"], registry=None)
        requests.labels("w0").inc(n)
        requests.labels(f"w{n % 3}").inc(1)
        latency = Histogram("t_latency_seconds", "latency", ["worker"],
                            buckets=(0.1, 1.0, 10.0), registry=None)
        latency.labels("w0").observe(0.05 * n)
        latency.labels("w1").observe(2.0)
        Summary("t_size_bytes", "size", registry=None).observe(n)
        for mode in ("sum", "min", "max", "mostrecent", "livesum", "all"):
            gauge = Gauge(f"t_{mode}", mode, ["worker"], multiprocess_mode=mode, registry=None)
            gauge.labels("w0").set(n)
            gauge.labels(f"w{n % 2}").set(-n)

    pids = []
    for arg in sys.argv[1:]:
        pid = os.fork()
        if pid == 0:
            write(int(arg))
            os._exit(0)
        os.waitpid(pid, 0)
        pids.append(pid)
        time.sleep(0.002)  # distinct mostrecent timestamps
    print(" ".join(map(str, pids)))
    """
)


def write_dead_processes(directory: Path, amounts: Iterable[int]) -> list[int]:
    """Real prometheus_client files in ``directory`` from children that have exited; their pids."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    done = subprocess.run(
        [sys.executable, "-c", _WRITERS, *map(str, amounts)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return [int(pid) for pid in done.stdout.split()]


Exposition = dict[tuple[str, str], dict[tuple[str, tuple[tuple[str, str], ...]], float]]


def exposition(families: Iterable[Metric]) -> Exposition:
    """Every family's samples by name and labels (order-free, so two reads compare)."""
    return {
        (family.name, family.type): {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for sample in family.samples
        }
        for family in families
    }


def read(directory: MetricsDirectory) -> Exposition:
    """What the admin app exposes from the directory now."""
    return exposition(multiprocess_families(directory.path))


def without_pid_gauges(read_out: Exposition) -> Exposition:
    """All but the ``all`` and live gauges, which belong to one process each."""
    return {key: value for key, value in read_out.items() if key[0] not in ("t_all", "t_livesum")}


def same_totals(left: Exposition, right: Exposition) -> bool:
    """The same families and samples with the same values: exactly for whole numbers
    (counts, buckets), and to the last bits for sums of fractions, which depend on the
    order they are added in (the collector's own order follows the directory listing)."""
    if left.keys() != right.keys():
        return False
    for family, samples in left.items():
        other = right[family]
        if samples.keys() != other.keys():
            return False
        for sample, value in samples.items():
            if value.is_integer() and value != other[sample]:
                return False
            if not math.isclose(value, other[sample], rel_tol=1e-12, abs_tol=1e-12):
                return False
    return True


@pytest.fixture
def directory(tmp_path: Path) -> MetricsDirectory:
    made = MetricsDirectory(tmp_path / "metrics")
    made.prepare()
    return made


def archives() -> set[str]:
    return {f"{kind}_{ARCHIVE}.db" for kind in FOLDED_KINDS}


class TestFoldEntries:
    """fold_entries merges values as MultiProcessCollector does, per key."""

    def test_counters_and_histograms_add(self) -> None:
        """Counters, histograms and summaries sum per key; other keys stay apart."""
        entries = [("a", 1.0, 0.0), ("b", 2.0, 0.0), ("a", 4.0, 0.0)]
        for kind in ("counter", "histogram", "summary", "gauge_sum"):
            assert fold_entries(kind, entries) == {"a": (5.0, 0.0), "b": (2.0, 0.0)}

    def test_min_and_max_gauges(self) -> None:
        """min keeps the least value, max the greatest."""
        entries = [("a", 3.0, 0.0), ("a", -1.0, 0.0), ("a", 2.0, 0.0)]
        assert fold_entries("gauge_min", entries)["a"][0] == -1.0
        assert fold_entries("gauge_max", entries)["a"][0] == 3.0

    def test_mostrecent_keeps_the_latest_write(self) -> None:
        """mostrecent keeps the value with the latest timestamp, whatever the order."""
        entries = [("a", 1.0, 10.0), ("a", 2.0, 30.0), ("a", 3.0, 20.0)]
        assert fold_entries("gauge_mostrecent", entries) == {"a": (2.0, 30.0)}

    def test_per_process_kinds_are_not_folded(self) -> None:
        """An ``all`` or live gauge has no merged value: KeyError."""
        for kind in ("gauge_all", "gauge_livesum"):
            with pytest.raises(KeyError):
                fold_entries(kind, [])


class TestRetire:
    """MetricsDirectory.retire folds a dead process's files into the archives."""

    def test_totals_are_identical_after_folding(self, directory: MetricsDirectory) -> None:
        """Six dead processes folded: every counter, histogram, summary and non-live gauge
        sample reads the same; only the archives are left; the per-process gauges are gone."""
        pids = write_dead_processes(directory.path, range(1, 7))
        assert len(directory.files()) == 6 * 9
        stock = read(directory)
        for pid in pids:
            directory.retire(pid)
        folded = read(directory)
        assert same_totals(folded, without_pid_gauges(stock)), (folded, stock)
        assert folded[("t_requests", "counter")][("t_requests_total", (("worker", "w0"),))] == 23
        assert {path.name for path in directory.files()} == archives()

    def test_many_restarts_keep_the_file_count_bounded(self, directory: MetricsDirectory) -> None:
        """Twenty processes, each retired as it exits: never more files than one process's
        and the archives, and the counter total only grows, by exactly what each added."""
        total = 0.0
        for amount in range(1, 21):
            (pid,) = write_dead_processes(directory.path, [amount])
            directory.retire(pid)
            total += amount + (amount % 3 == 0)
            assert {path.name for path in directory.files()} == archives()
            requests = read(directory)[("t_requests", "counter")]
            assert requests[("t_requests_total", (("worker", "w0"),))] == total

    def test_a_live_processes_files_are_left_alone(self, directory: MetricsDirectory) -> None:
        """Retiring one pid touches no other pid's file, and the other's values still add."""
        dead, alive = write_dead_processes(directory.path, [1, 2])
        kept = {path.name: path.read_bytes() for path in directory.path.glob(f"*_{alive}.db")}
        assert len(kept) == 9
        stock = read(directory)
        directory.retire(dead)
        assert {
            path.name: path.read_bytes() for path in directory.path.glob(f"*_{alive}.db")
        } == kept
        folded = read(directory)
        assert same_totals(without_pid_gauges(folded), without_pid_gauges(stock))

    def test_a_damaged_file_is_salvaged(self, directory: MetricsDirectory) -> None:
        """A file claiming more than it holds (cut short) fails every read of it; folded,
        what precedes the damage counts and the directory reads again."""
        (pid,) = write_dead_processes(directory.path, [5])
        counter = directory.path / f"counter_{pid}.db"
        data = bytearray(counter.read_bytes())
        used = struct.unpack_from("i", data, 0)[0]
        struct.pack_into("i", data, 0, used + 4096)  # the next entry's bytes are not there
        counter.write_bytes(bytes(data[: used + 8]))
        with pytest.raises((struct.error, RuntimeError)):
            list(MultiProcessCollector.merge([str(counter)]))  # type: ignore[no-untyped-call]
        directory.retire(pid)
        requests = read(directory)[("t_requests", "counter")]
        assert requests[("t_requests_total", (("worker", "w0"),))] == 5
        assert {path.name for path in directory.files()} == archives()

    def test_a_file_of_an_unknown_kind_is_kept(self, directory: MetricsDirectory) -> None:
        """A kind this code does not know is neither folded nor deleted."""
        stray = directory.path / "novel_4242.db"
        MmapedDict(str(stray)).close()  # type: ignore[no-untyped-call]
        directory.retire(4242)
        assert stray.exists()


class TestReading:
    """reading() keeps folds out while a reader reads."""

    def test_readers_never_see_a_total_change_while_folds_run(
        self, directory: MetricsDirectory
    ) -> None:
        """Every read under reading() gives the same totals while twelve dead processes
        are folded one by one: nothing counted twice, nothing missing."""
        pids = write_dead_processes(directory.path, range(1, 13))
        expected = without_pid_gauges(read(directory))
        seen: list[Exposition] = []
        done = threading.Event()

        def scrape() -> None:
            while not done.is_set():
                with directory.reading():
                    seen.append(without_pid_gauges(read(directory)))

        reader = threading.Thread(target=scrape, name="scraper", daemon=True)
        reader.start()
        try:
            for pid in pids:
                directory.retire(pid)
        finally:
            done.set()
            reader.join(30.0)
        assert not reader.is_alive()
        assert seen and all(same_totals(each, expected) for each in seen)
        assert same_totals(read(directory), expected)

    def test_a_fold_waits_for_the_reader(self, directory: MetricsDirectory) -> None:
        """While a reader holds the directory, a retire does not touch it; after, it does."""
        (pid,) = write_dead_processes(directory.path, [3])
        before = {path.name for path in directory.files()}
        with directory.reading():
            folding = threading.Thread(target=directory.retire, args=(pid,), daemon=True)
            folding.start()
            folding.join(0.3)
            assert folding.is_alive(), "the fold ran under a reader"
            assert {path.name for path in directory.files()} == before
        folding.join(10.0)
        assert not folding.is_alive()
        assert {path.name for path in directory.files()} == archives()
