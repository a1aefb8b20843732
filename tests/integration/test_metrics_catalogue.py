"""``docs/metrics.md`` and the live ``/metrics`` agree, both ways.

A real ``switchboard up --outputs-via router`` (so the router splits outputs too) is put
under load: generations, a stream, a bad request, a pause and a continue, a malformed
frame the router must reject and an output for a worker it does not know, which it must
drop. Then every family of the catalogue's tables is in the exposition with its type and
labels, and every ``switchboard_*`` family of the exposition is in the catalogue.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import zmq

from dashboards.catalogue import load_catalogue
from router_core.endpoints import DetokenizerRouterEndpoints, RouterEndpoints, worker_address
from router_core.transport import connect
from router_core.version import package_version
from router_core.wire.codec import frame_batch
from router_core.wire.outputs import BatchStrOutput
from tests.fault.harness.procfs import children_by_role
from tests.integration.harness.admin_stack import AdminStack, admin_stack
from tests.integration.harness.curve_keys import free_gateway_listen, gateway_keys
from tests.integration.harness.polling import wait_until
from tests.integration.harness.scrape import families, generate, samples, scrape, some_load
from tests.support.zmq_context import bounded_context

pytestmark = pytest.mark.integration

DEADLINE_S = 30.0


def exposed_name(name: str, kind: str) -> str:
    """The catalogue's name of a parsed family (the parser drops a counter's ``_total``)."""
    return f"{name}_total" if kind == "counter" else name


def reject_and_drop(run_dir: Path) -> None:
    """A malformed request frame (rejected) and an output for an unknown worker (dropped),
    sent straight to the tokenizer router's sockets."""
    endpoints = RouterEndpoints.in_run_dir(run_dir)
    with bounded_context() as context:
        requests = connect(context, zmq.PUSH, endpoints.requests, linger_ms=1000)
        requests.send_multipart([b"not a header", b"x"])
        outputs = connect(context, zmq.PUSH, endpoints.outputs, linger_ms=1000)
        batch = BatchStrOutput(
            rids=["catalogue-orphan"],
            http_worker_ipcs=[f"ipc://{run_dir}/worker-nobody"],
            output_strs=["lost"],
        )
        outputs.send_multipart(frame_batch(batch))
        requests.close()
        outputs.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminStack]:
    """A stack whose outputs go through the router, with a worker gateway, with every
    family exercised."""
    keys = gateway_keys(tmp_path_factory.mktemp("keys"))
    listen = free_gateway_listen()
    extra = ("--outputs-via", "router", *keys.stack_args(listen))
    with admin_stack(tmp_path_factory, extra_args=extra) as running:
        some_load(running)
        with running.client() as client:
            paused = client.post("/api/pause", json={"mode": "abort", "timeout_s": 5})
            assert paused.status_code == 200, paused.text
            resumed = client.post("/api/continue", json={"timeout_s": 5})
            assert resumed.status_code == 200, resumed.text
        generate(running.base_url)
        reject_and_drop(running.run_dir)
        yield running


class TestCatalogue:
    """The catalogue is the contract for names, types and labels."""

    def test_the_catalogue_parses(self) -> None:
        """The tables list the families the issue asks for, each typed and prefixed."""
        entries = load_catalogue()
        assert len(entries) >= 30
        assert {entry.type for entry in entries.values()} == {"counter", "gauge", "histogram"}
        assert all(name.startswith("switchboard_") for name in entries)
        assert all(name.endswith("_total") for name, e in entries.items() if e.type == "counter")

    def test_every_catalogued_family_is_exposed(self, stack: AdminStack) -> None:
        """Each catalogued family has samples, of its type, with exactly its labels."""
        entries = load_catalogue()

        def exposed() -> dict[str, object] | None:
            found = {
                exposed_name(name, family.type): family
                for name, family in families(scrape(stack)).items()
            }
            return found if set(entries) <= set(found) else None

        try:
            found = wait_until(exposed, DEADLINE_S, "every catalogued family")
        except AssertionError:
            names = {exposed_name(n, f.type) for n, f in families(scrape(stack)).items()}
            raise AssertionError(f"not exposed: {sorted(set(entries) - names)}") from None
        for name, entry in entries.items():
            family = found[name]
            assert family.type == entry.type, f"{name}: {family.type}, catalogued {entry.type}"
            assert family.samples, f"{name} has no samples"
            for sample in family.samples:
                labels = set(sample.labels) - {"le"}
                assert labels == entry.labels, f"{sample.name}{sample.labels}: not {entry.labels}"

    def test_every_exposed_family_is_catalogued(self, stack: AdminStack) -> None:
        """No switchboard_* family is exposed that the catalogue does not list."""
        entries = load_catalogue()
        exposed = {
            exposed_name(name, family.type)
            for name, family in families(scrape(stack)).items()
            if name.startswith("switchboard_")
        }
        assert exposed - set(entries) == set()


class TestEveryProcessReportsRejects:
    """Drops and rejects are not the routers' alone: every process that counts them exports them."""

    def test_engine_detokenizer_and_worker_rejects_reach_metrics(self, stack: AdminStack) -> None:
        """A malformed frame sent to the engine, a detokenizer and a worker is counted by
        each as rejected{bad_header} and shows on /metrics under its process within the
        export interval."""
        run_dir = stack.run_dir
        targets = [
            RouterEndpoints.in_run_dir(run_dir).engine,
            DetokenizerRouterEndpoints.in_run_dir(run_dir, 2).detokenizers[0],
            worker_address(run_dir, "w0"),
        ]
        with bounded_context() as context:
            for endpoint in targets:
                sock = connect(context, zmq.PUSH, endpoint, linger_ms=1000)
                sock.send_multipart([b"not a header", b"x"])
                sock.close()

        def processes() -> set[str] | None:
            found = {
                labels["process"]
                for labels, value in samples(
                    scrape(stack), "switchboard_rejected_frames_total", reason="bad_header"
                )
                if value >= 1
            }
            return found if {"engine", "detokenizer", "worker"} <= found else None

        wait_until(processes, DEADLINE_S, "rejects from the engine, a detokenizer and a worker")


#: Children of the stack that must report their CPU and memory.
CHILDREN = frozenset({"router", "detok-router", "engine", "detokenizer-0", "worker-w0", "admin"})


class TestEveryProcessReportsUsage:
    """CPU time and memory come from every process of the stack, each its own."""

    def test_each_child_reports_its_cpu_and_memory(self, stack: AdminStack) -> None:
        """Every child has a CPU-seconds series above 0 and no more than the kernel says
        that process used, and a resident size close to the kernel's for that process
        (a child's reading may be a second old): each reports its own, no other's."""

        def usage() -> dict[str, tuple[float, float]] | None:
            text = scrape(stack)
            cpu = {
                labels["child"]: value
                for labels, value in samples(text, "switchboard_process_cpu_seconds_total")
            }
            memory = {
                labels["child"]: value
                for labels, value in samples(text, "switchboard_process_resident_memory_bytes")
            }
            if not set(cpu) & set(memory) >= CHILDREN:
                return None
            return {child: (cpu[child], memory[child]) for child in cpu}

        found = wait_until(usage, DEADLINE_S, "CPU and memory of every child")
        pids = children_by_role(stack.supervisor.pid)
        for child, (cpu, memory) in found.items():
            process = psutil.Process(pids[child])
            times = process.cpu_times()
            assert 0 < cpu <= times.user + times.system + 0.05, (child, cpu, times)
            rss = process.memory_info().rss
            assert abs(memory - rss) <= max(16 * 2**20, rss // 4), (child, memory, rss)

    def test_build_info_names_the_version(self, stack: AdminStack) -> None:
        (labels, value), *others = samples(scrape(stack), "switchboard_build_info")
        assert not others and value == 1
        assert labels["version"] == package_version()
        assert labels["python"] == platform.python_version()
