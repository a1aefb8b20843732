"""Tests of ``switchboard bench e2e``: its arithmetic, its HTTP client, and one tiny run.

The pure parts (percentiles, window summaries, CPU shares, the report) are checked with
made-up numbers; the streaming client against a small in-process HTTP server; and one
integration test runs a one-configuration suite against a real ``switchboard up`` stack.
No timing is asserted (these machines are noisy).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from switchboard.bench.e2e import E2EPlan, run_suite
from switchboard.bench.e2e_client import (
    ClientKind,
    StreamError,
    final_event_tokens,
    generate_body,
    open_clients,
)
from switchboard.bench.e2e_report import E2ERun, render, summarize
from switchboard.bench.e2e_stack import Stack, StackConfig, run_dir_of
from switchboard.bench.e2e_stats import (
    CpuSample,
    LoadSummary,
    RequestRecord,
    cpu_by_role,
    cpu_per_process,
    percentile,
    role_of,
    routing_share,
    summarize_window,
)
from switchboard.bench.procs import BenchError

PY = "/venv/bin/python3"


def _stream(*events: bytes) -> bytes:
    return b"".join(b"data: " + event + b"\n\n" for event in (*events, b"[DONE]"))


FINAL = b'{"text":"ab","meta_info":{"completion_tokens":2,"finish_reason":{"type":"length"}}}'
FIRST = b'{"text":"a","meta_info":{"completion_tokens":1,"finish_reason":null}}'


class TestPercentile:
    def test_interpolates_between_closest_ranks(self) -> None:
        """p50 of an even count is the mean of the middle two; p0 and p100 are the ends."""
        values = [4.0, 1.0, 3.0, 2.0]
        assert percentile(values, 50) == pytest.approx(2.5)
        assert percentile(values, 0) == 1.0
        assert percentile(values, 100) == 4.0
        assert percentile(values, 99) == pytest.approx(3.97)

    def test_one_value_and_none(self) -> None:
        """A single value is every percentile; no values give None."""
        assert percentile([7.0], 99) == 7.0
        assert percentile([], 50) is None

    def test_rejects_out_of_range(self) -> None:
        """A percentile outside 0..100 is a programming error."""
        with pytest.raises(ValueError, match="within"):
            percentile([1.0], 101)


class TestWindow:
    def test_counts_requests_where_they_finish(self) -> None:
        """Only requests finishing inside the window count; rates divide by its length."""
        records = [
            RequestRecord(0.0, 0.1, 0.9, 10),  # warm-up: before the window
            RequestRecord(0.5, 0.6, 1.5, 10),
            RequestRecord(1.0, 1.2, 2.0, 20),
            RequestRecord(2.0, 2.1, 3.5, 30),  # after the window
        ]
        summary = summarize_window(records, 1.0, 3.0)
        assert summary.requests == 2
        assert summary.requests_per_s == pytest.approx(1.0)
        assert summary.output_tokens_per_s == pytest.approx(15.0)
        assert summary.ttft_p50_s == pytest.approx(0.15)
        assert summary.e2e_p50_s == pytest.approx(1.0)
        assert summary.errors_total == 0

    def test_errors_are_counted_everywhere_and_sampled(self) -> None:
        """Failed requests count in the total wherever they end, and are never throughput."""
        records = [
            RequestRecord(0.0, None, 0.5, 0, "ConnectionRefusedError: x"),
            RequestRecord(1.0, 1.1, 1.5, 0, "StreamError: y"),
            RequestRecord(1.0, 1.1, 1.6, 0, "StreamError: y"),
            RequestRecord(1.0, 1.1, 2.0, 5),
        ]
        summary = summarize_window(records, 1.0, 3.0)
        assert (summary.requests, summary.errors_in_window, summary.errors_total) == (1, 2, 3)
        assert summary.error_samples == ("ConnectionRefusedError: x", "StreamError: y")

    def test_empty_window_has_no_latencies(self) -> None:
        """A window without finished requests reports zero rates and no percentiles."""
        summary = summarize_window([], 0.0, 1.0)
        assert (summary.requests_per_s, summary.ttft_p99_s, summary.e2e_p50_s) == (0.0, None, None)


class TestRoles:
    @pytest.mark.parametrize(
        ("argv", "role"),
        [
            ([PY, "-m", "switchboard.cli", "up", "--workers", "2"], "supervisor"),
            ([PY, "/venv/bin/switchboard", "up"], "supervisor"),
            ([PY, "-m", "switchboard.cli", "router", "--run-dir", "/r"], "router"),
            ([PY, "-m", "switchboard.cli", "detok-router", "--detokenizers", "2"], "detok-router"),
            (
                [PY, "-m", "switchboard.cli", "detokenizer", "--outputs-via", "router"],
                "detokenizer",
            ),
            ([PY, "-m", "switchboard.cli", "engine", "--outputs-via", "detokenizers"], "engine"),
            ([PY, "-m", "switchboard.cli", "worker", "--worker-id", "w0"], "worker"),
            ([PY, "-c", "from multiprocessing import resource_tracker"], "other"),
            (["worker"], "other"),
        ],
    )
    def test_role_is_the_subcommand(self, argv: list[str], role: str) -> None:
        """The first argument naming a subcommand decides, not a flag value after it."""
        assert role_of(argv) == role

    def test_run_dir_of_a_child(self) -> None:
        """The run directory is read from a child's ``--run-dir`` flag."""
        assert run_dir_of([PY, "-m", "switchboard.cli", "router", "--run-dir", "/r"]) == Path("/r")
        assert run_dir_of([PY, "-m", "switchboard.cli", "up"]) is None


class TestCpuShare:
    def test_sums_deltas_per_role(self) -> None:
        """Each role gets the CPU its processes used between the samples."""
        before = {
            1: CpuSample("router", 1.0),
            2: CpuSample("worker", 10.0),
            3: CpuSample("worker", 20.0),
            4: CpuSample("detok-router", 0.5),
        }
        after = {
            1: CpuSample("router", 1.5),
            2: CpuSample("worker", 13.0),
            3: CpuSample("worker", 24.0),
            4: CpuSample("detok-router", 1.0),
        }
        used, unmatched = cpu_by_role(before, after)
        assert used == pytest.approx({"router": 0.5, "worker": 7.0, "detok-router": 0.5})
        assert unmatched == []
        assert routing_share(used) == pytest.approx(1.0 / 8.0)

    def test_processes_in_one_sample_only_are_flagged_not_counted(self) -> None:
        """A process that died or appeared mid-window is reported, its CPU left out."""
        before = {1: CpuSample("router", 1.0), 2: CpuSample("worker", 5.0)}
        after = {1: CpuSample("router", 2.0), 3: CpuSample("worker", 0.2)}
        used, unmatched = cpu_by_role(before, after)
        assert used == {"router": 1.0}
        assert unmatched == [2, 3]

    def test_per_process_split_is_sorted_busiest_first(self) -> None:
        """Each process of a role is listed on its own, so a lopsided split shows."""
        before = {1: CpuSample("detokenizer", 1.0), 2: CpuSample("detokenizer", 1.0)}
        after = {1: CpuSample("detokenizer", 1.0), 2: CpuSample("detokenizer", 4.0)}
        assert cpu_per_process(before, after) == {"detokenizer": [3.0, 0.0]}

    def test_no_cpu_means_no_share(self) -> None:
        """Without any CPU used the share is unknown, not zero."""
        assert routing_share({}) is None
        assert routing_share({"router": 0.0, "worker": 0.0}) is None


class TestFinalEvent:
    def test_reads_completion_tokens_of_the_last_event(self) -> None:
        """The last event before [DONE] gives the token count."""
        assert final_event_tokens(_stream(FIRST, FINAL)) == 2

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (_stream(FIRST, FINAL)[: -len(b"data: [DONE]\n\n")], "DONE"),
            (_stream(b'{"error":{"message":"engine gone"}}'), "engine gone"),
            (_stream(FIRST), "finish reason"),
            (_stream(b"{not json"), "undecodable"),
            (b"data: [DONE]\n\n", "DONE"),
        ],
    )
    def test_incomplete_or_failed_streams_raise(self, body: bytes, message: str) -> None:
        """A stream without [DONE], with an error event or without a finish is an error."""
        with pytest.raises(StreamError, match=message):
            final_event_tokens(body)


class _SseServer:
    """A keep-alive HTTP/1.1 server: every POST gets a chunked SSE stream, except the
    third, which gets a 503. Every connection it accepted is closed by :meth:`close`."""

    def __init__(self) -> None:
        self.served = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                json.loads(await reader.readexactly(length))
                self.served += 1
                writer.write(self._response())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the client went away

    def _response(self) -> bytes:
        if self.served == 3:
            body = b'{"detail":"draining"}'
            return b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s" % (
                len(body),
                body,
            )
        chunks = [event + b"\n\n" for event in _stream(FIRST, FINAL).split(b"\n\n")[:-1]]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks)
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def _four_requests(kind: ClientKind) -> list[RequestRecord]:
    fake = _SseServer()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    body = generate_body("hi", 2)
    try:
        async with open_clients(
            kind, host="127.0.0.1", port=port, body=body, count=1, timeout_s=5.0
        ) as clients:
            return [await clients[0].generate() for _ in range(4)]
    finally:
        server.close()
        await fake.close()
        await server.wait_closed()


class TestClients:
    @pytest.mark.parametrize("kind", ["raw", "httpx"])
    def test_streams_over_one_connection_and_reports_failures(self, kind: ClientKind) -> None:
        """Both transports decode chunked SSE, stamp the first chunk, keep the connection
        alive across requests, and report an HTTP error as a failed record."""
        records = asyncio.run(_four_requests(kind))
        ok = [r for r in records if r.error is None]
        assert [r.tokens for r in ok] == [2, 2, 2]
        for record in ok:
            assert record.first is not None
            assert record.started <= record.first <= record.finished
        assert records[2].error is not None
        assert "503" in records[2].error


def _run(config: str, workers: int, share: float, repetition: int = 0) -> E2ERun:
    load = LoadSummary(10.0, 500, 50.0, 6400.0, 0.1, 0.3, 1.2, 1.6, 0, 0)
    router = 10.0 * share
    return E2ERun(
        config=config,
        workers=workers,
        repetition=repetition,
        load=load,
        cpu_s_by_role={"router": router / 2, "detok-router": router / 2, "worker": 10 - router},
        loadgen_cpu_s=2.0,
        cpu_s_per_process={"detokenizer": [5.0, 0.0], "worker": [4.0, 3.0]},
    )


PLAN = {
    "concurrency": 64,
    "max_new_tokens": 128,
    "step_time_s": 0.005,
    "detokenizers": 2,
    "repeats": 3,
    "measure_s": 20.0,
    "warmup_s": 5.0,
    "client_label": "raw",
}
MACHINE = {"cpu_count": 2, "load_average_at_start": [0.5, 0.5, 0.5], "python": "3.11"}


class TestReport:
    def test_headline_is_the_worst_configuration_median(self) -> None:
        """routing_cpu_share is the largest per-configuration median, judged against 10%."""
        runs = [
            _run("1 worker", 1, share)
            for share in (0.04, 0.05, 0.30)  # one outlier: the median ignores it
        ] + [_run("2 workers", 2, share) for share in (0.06, 0.07, 0.08)]
        doc = summarize(runs, plan=PLAN, machine=MACHINE, elapsed_s=1.0)
        json.dumps(doc)
        assert doc["routing_cpu_share_by_config"] == pytest.approx(
            {"1 worker": 0.05, "2 workers": 0.07}
        )
        assert doc["routing_cpu_share"] == pytest.approx(0.07)
        assert doc["targets"]["routing_cpu_share"]["verdict"] == "PASS"
        assert doc["configs"]["1 worker"]["medians"]["loadgen_cores"] == pytest.approx(0.2)
        assert doc["configs"]["1 worker"]["medians"]["stack_cores"] == pytest.approx(1.0)
        assert doc["configs"]["2 workers"]["process_cores_medians"] == {
            "detokenizer": pytest.approx([0.5, 0.0]),
            "worker": pytest.approx([0.4, 0.3]),
        }
        text = render(doc)
        assert "1 worker" in text
        assert "2 workers" in text
        assert "PASS" in text
        assert "detokenizers 0.50 / 0.00" in text

    def test_share_above_target_and_errors_fail(self) -> None:
        """A share above 10% and any failed request are both reported as FAIL."""
        failed = LoadSummary(10.0, 1, 0.1, 1.0, None, None, None, None, 1, 4, ("HTTP 503",))
        run = _run("1 worker", 1, 0.2)
        runs = [E2ERun(**{**run.__dict__, "load": failed})]
        doc = summarize(runs, plan=PLAN, machine=MACHINE, elapsed_s=1.0)
        assert doc["targets"]["routing_cpu_share"]["verdict"] == "FAIL"
        assert doc["errors"] == 4
        assert doc["targets"]["errors"]["verdict"] == "FAIL"
        assert "HTTP 503" in render(doc)


@pytest.fixture
def clean_tmpdir() -> Iterator[Path]:
    """A TMPDIR for the stacks' run directories; afterwards it must be empty and no
    process started by the test may be left running."""
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    root = Path(tempfile.mkdtemp(prefix="sbe-"))
    try:
        yield root
        assert list(root.iterdir()) == []
        after = {child.pid for child in psutil.Process().children(recursive=True)}
        assert after <= before
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.integration
class TestSuite:
    def test_tiny_run_reports_every_figure_and_cleans_up(self, clean_tmpdir: Path) -> None:
        """One small configuration on a real stack: every request succeeds, every figure
        and CPU role is reported, and no process or run directory is left behind."""
        plan = E2EPlan(
            repeats=1,
            warmup_s=0.5,
            measure_s=2.0,
            start_together=False,
            workers=(1,),
            detokenizers=1,
            concurrency=4,
            max_new_tokens=16,
        )
        doc = run_suite(plan, tmpdir=clean_tmpdir)
        json.dumps(doc)
        assert doc["errors"] == 0
        config = doc["configs"]["1 worker"]
        assert config["medians"]["requests_per_s"] > 0
        assert config["medians"]["output_tokens_per_s"] > 0
        assert 0 < doc["routing_cpu_share"] < 1
        run = doc["runs"][0]
        assert run["processes"] == {
            "supervisor": 1,
            "admin": 1,
            "router": 1,
            "detok-router": 1,
            "detokenizer": 1,
            "engine": 1,
            "worker": 1,
        }
        assert set(run["cpu_s_by_role"]) <= set(run["processes"])
        assert len(run["cpu_s_per_process"]["worker"]) == 1
        assert run["unmatched_pids"] == []
        assert doc["targets"]["routing_cpu_share"]["verdict"] in {"PASS", "FAIL"}

    def test_a_stack_that_cannot_start_is_an_error(self, clean_tmpdir: Path) -> None:
        """A supervisor that exits at startup raises BenchError with its message."""
        stack = Stack(StackConfig(workers=0), clean_tmpdir)
        try:
            stack.launch()
            with pytest.raises(BenchError, match="workers"):
                stack.wait_serving()
        finally:
            stack.stop()
