"""A router's ``metrics`` snapshot as Prometheus families (``docs/metrics.md``).

Pure: :func:`router_families` turns the snapshot a router answers to the ``metrics``
control command (:class:`~router_core.control.replies.RouterMetrics`, and for the
tokenizer router :class:`~router_core.control.replies.TokenizerRouterMetrics`, which
adds the registry, pause and engine) into ``prometheus_client`` metric families, and
:func:`router_up_family` says which routers answered. A histogram whose buckets do not
end at ``+Inf`` raises ``ValueError``; the caller treats that router as unread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from router_core.control.replies import (
    EngineMetrics,
    HistogramSnapshot,
    RouterMetrics,
    TokenizerRouterMetrics,
)

__all__ = [
    "HELP",
    "UNKNOWN_WORKER",
    "router_families",
    "router_up_family",
    "worker_ids_by_address",
]

#: The ``worker`` label of detokenizer traffic whose return address no worker has.
UNKNOWN_WORKER = "unknown"

#: Each router family's HELP text (the catalogue's meaning, shortened).
HELP: Final[Mapping[str, str]] = {
    "switchboard_messages_total": "messages per route and worker",
    "switchboard_message_bytes_total": "bytes of those messages, all frames",
    "switchboard_dropped_messages_total": "messages a router dropped, by reason",
    "switchboard_rejected_frames_total": "inbound messages a router refused, by reason",
    "switchboard_hop_latency_seconds": "from the sender's sent_ns to receipt, per route",
    "switchboard_split_batch_rows": "rows per batch message a router split",
    "switchboard_router_backlog_messages": "messages queued in a router's bounded backlogs",
    "switchboard_router_up": "1 if the admin app read the router's metrics at this scrape",
    "switchboard_workers": "registered workers by state",
    "switchboard_worker_up": "1 while the worker is registered and heartbeating",
    "switchboard_worker_last_heartbeat_timestamp_seconds": "Unix time of the last heartbeat",
    "switchboard_worker_in_flight_requests": "requests in flight, per the last heartbeat",
    "switchboard_paused": "1 while generation is paused",
    "switchboard_pause_state_since_timestamp_seconds": "Unix time the pause state last changed",
    "switchboard_pause_operations_total": "finished pause/continue operations",
    "switchboard_pause_barrier_seconds": "from broadcast to answer (all acknowledged, or timeout)",
    "switchboard_engine_up": "1 if the engine sent an event within the engine timeout",
    "switchboard_engine_running_requests": "requests running in the engine",
    "switchboard_engine_waiting_requests": "requests waiting in the engine's queue",
    "switchboard_engine_max_running_requests": "the engine's running-request capacity",
    "switchboard_engine_token_usage_ratio": "share of the engine's token capacity in use, 0-1",
    "switchboard_process_cpu_seconds_total": "user plus system CPU seconds a process used",
    "switchboard_process_resident_memory_bytes": "a process's resident memory",
    "switchboard_build_info": "1, labelled with the admin app's version and Python's",
}

#: A router's process name -> its child's name in the supervisor (``switchboard up``).
ROUTER_CHILDREN: Final = {"tokenizer_router": "router", "detokenizer_router": "detok-router"}

#: Snapshot histogram key -> (family, label name).
_HISTOGRAMS: Final = (
    ("hop_latency_seconds", "switchboard_hop_latency_seconds", "route"),
    ("split_batch_rows", "switchboard_split_batch_rows", "route"),
    ("pause_barrier_seconds", "switchboard_pause_barrier_seconds", "operation"),
)


def _counter(name: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, HELP[name], labels=labels)


def _gauge(name: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, HELP[name], labels=labels or [])


def _le(bound: float | str) -> str:
    """A bucket bound spelt as prometheus_client spells it (``0.005``, ``+Inf``), so the
    routers' buckets and the workers' are the same series."""
    text: str = floatToGoString(float(bound))  # type: ignore[no-untyped-call]  # untyped in 0.26
    return text


def _histogram(
    name: str, label: str, series: Mapping[str, HistogramSnapshot]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, HELP[name], labels=[label])
    for value, snapshot in sorted(series.items()):
        buckets = [(_le(le), float(count)) for le, count in snapshot.buckets]
        if not buckets or buckets[-1][0] != "+Inf":
            raise ValueError(f"{name}{{{label}={value!r}}}: buckets do not end at +Inf")
        family.add_metric([value], buckets, snapshot.sum)
    return family


def _fabric(
    process: str, snapshot: RouterMetrics, worker_ids: Mapping[str, str]
) -> Iterable[Metric]:
    """Traffic, drops, rejects, histograms and backlog: both routers report these."""
    messages = _counter("switchboard_messages_total", ["route", "worker"])
    size = _counter("switchboard_message_bytes_total", ["route", "worker"])
    # The detokenizer router labels traffic by return address: map each to its worker id,
    # and an address no registry row has to "unknown" (never a raw address as a label).
    by_address = process == "detokenizer_router"
    totals: dict[tuple[str, str], list[float]] = {}
    for row in snapshot.traffic:
        worker = worker_ids.get(row.worker, UNKNOWN_WORKER) if by_address else row.worker
        total = totals.setdefault((row.route, worker), [0.0, 0.0])
        total[0] += row.messages
        total[1] += row.bytes
    for (route, worker), (count, nbytes) in sorted(totals.items()):
        messages.add_metric([route, worker], count)
        size.add_metric([route, worker], nbytes)
    yield messages
    yield size
    for counts, name in (
        (snapshot.dropped, "switchboard_dropped_messages_total"),
        (snapshot.rejected, "switchboard_rejected_frames_total"),
    ):
        family = _counter(name, ["process", "reason"])
        for reason, count in sorted(counts.items()):
            family.add_metric([process, reason], float(count))
        yield family
    histograms = snapshot.histograms
    for key, name, label in _HISTOGRAMS:
        if key in histograms:
            yield _histogram(name, label, histograms[key])
    backlog = _gauge("switchboard_router_backlog_messages", ["process"])
    backlog.add_metric([process], float(snapshot.backlog_messages))
    yield backlog
    if snapshot.cpu_seconds or snapshot.resident_bytes:  # 0 and 0: a router that cannot say
        yield from usage_families(
            process, ROUTER_CHILDREN.get(process, process), snapshot.cpu_seconds,
            snapshot.resident_bytes,
        )  # fmt: skip


def usage_families(
    process: str, child: str, cpu_seconds: float, resident_bytes: int
) -> Iterable[Metric]:
    """One process's CPU seconds and resident memory, labelled ``process`` and ``child``."""
    cpu = _counter("switchboard_process_cpu_seconds_total", ["process", "child"])
    cpu.add_metric([process, child], cpu_seconds)
    memory = _gauge("switchboard_process_resident_memory_bytes", ["process", "child"])
    memory.add_metric([process, child], float(resident_bytes))
    return (cpu, memory)


def build_info_family(version: str, python: str) -> Metric:
    """``switchboard_build_info{version, python} 1``: what is deployed, for joins."""
    family = _gauge("switchboard_build_info", ["version", "python"])
    family.add_metric([version, python], 1.0)
    return family


def _workers(snapshot: TokenizerRouterMetrics) -> Iterable[Metric]:
    """Registry and pause state: the tokenizer router's own."""
    by_state = _gauge("switchboard_workers", ["state"])
    for state, count in sorted(snapshot.workers_by_state.items()):
        by_state.add_metric([state], float(count))
    # ``host`` says where a worker runs once a stack spans hosts (docs/deploy.md).
    up = _gauge("switchboard_worker_up", ["worker", "host"])
    heartbeat = _gauge("switchboard_worker_last_heartbeat_timestamp_seconds", ["worker", "host"])
    in_flight = _gauge("switchboard_worker_in_flight_requests", ["worker", "host"])
    seen: set[str] = set()
    for row in snapshot.workers:
        if row.worker in seen:  # a live record comes first; an id is one series
            continue
        seen.add(row.worker)
        labels = [row.worker, row.host]
        up.add_metric(labels, float(row.up))
        heartbeat.add_metric(labels, row.last_heartbeat_unix_s)
        in_flight.add_metric(labels, float(row.in_flight))
    paused = _gauge("switchboard_paused")
    paused.add_metric([], 1.0 if snapshot.paused else 0.0)
    since = _gauge("switchboard_pause_state_since_timestamp_seconds")
    since.add_metric([], snapshot.pause_state_since_unix_s)
    operations = _counter("switchboard_pause_operations_total", ["operation", "mode", "result"])
    for finished in snapshot.pause_operations:
        labels = [finished.operation, finished.mode, finished.result]
        operations.add_metric(labels, float(finished.count))
    yield from (by_state, up, heartbeat, in_flight, paused, since, operations)


def _engine(engine: EngineMetrics | None) -> Iterable[Metric]:
    """The engine's liveness and latest load (zeros before its first report); a
    snapshot with no engine block gives only ``switchboard_engine_up`` 0."""
    up = _gauge("switchboard_engine_up")
    up.add_metric([], 1.0 if engine is not None and engine.up else 0.0)
    yield up
    if engine is None:
        return
    for value, name in (
        (engine.running, "switchboard_engine_running_requests"),
        (engine.waiting, "switchboard_engine_waiting_requests"),
        (engine.max_running, "switchboard_engine_max_running_requests"),
        (engine.token_usage, "switchboard_engine_token_usage_ratio"),
    ):
        family = _gauge(name)
        family.add_metric([], float(value))
        yield family


def worker_ids_by_address(snapshot: TokenizerRouterMetrics | None) -> dict[str, str]:
    """``{return address: worker id}`` of the workers in a tokenizer router's snapshot.

    The detokenizer router knows a worker only by the return address its rows carry;
    this turns its ``worker`` labels into the ids every other family uses.
    """
    if snapshot is None:
        return {}
    rows = [row for row in snapshot.workers if row.address]
    # Live rows last, so a live worker wins over a departed one that had its address.
    rows.sort(key=lambda row: bool(row.up))
    return {row.address: row.worker for row in rows}


def router_families(
    snapshot: RouterMetrics, worker_ids: Mapping[str, str] | None = None
) -> list[Metric]:
    """The families of one router's snapshot; the tokenizer router's include the
    registry, pause and engine families. A traffic ``worker`` that is a key of
    ``worker_ids`` (a return address) is reported as its value (the worker id)."""
    families = list(_fabric(snapshot.process, snapshot, worker_ids or {}))
    if isinstance(snapshot, TokenizerRouterMetrics):
        families += _workers(snapshot)
        families += _engine(snapshot.engine)
    return families


def router_up_family(answered: Mapping[str, bool]) -> Metric:
    """``switchboard_router_up{process}``: 1 for each router read at this scrape, else 0."""
    family = _gauge("switchboard_router_up", ["process"])
    for process, ok in sorted(answered.items()):
        family.add_metric([process], 1.0 if ok else 0.0)
    return family
