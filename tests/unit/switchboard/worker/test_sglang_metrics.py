"""SGLang's metric names of the workers' families: sums over workers, the engine's gauges."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from router_core.wire.control import LoadSnapshot
from switchboard.worker.sglang_metrics import sglang_families

MODEL = "tiny-llama"


def counter(name: str, per_worker: dict[str, float]) -> Metric:
    """A counter family as prometheus_client's multiprocess collector gives it."""
    family = Metric(name, "help", "counter")
    family.samples = [
        Sample(f"{name}_total", {"worker": worker}, value) for worker, value in per_worker.items()
    ]
    return family


def histogram(name: str, per_worker: dict[str, list[float]], sums: dict[str, float]) -> Metric:
    """Cumulative bucket counts at le 0.1, 1, +Inf per worker."""
    family = Metric(name, "help", "histogram")
    for worker, counts in per_worker.items():
        for le, count in zip(("0.1", "1.0", "+Inf"), counts, strict=True):
            family.samples.append(Sample(f"{name}_bucket", {"worker": worker, "le": le}, count))
        family.samples.append(Sample(f"{name}_sum", {"worker": worker}, sums[worker]))
        family.samples.append(Sample(f"{name}_count", {"worker": worker}, counts[-1]))
    return family


def by_name(families: list[Metric]) -> dict[str, Metric]:
    return {family.name: family for family in families}


def test_counters_are_summed_over_workers_under_the_model_name() -> None:
    found = by_name(
        sglang_families(
            [
                counter("switchboard_prompt_tokens", {"w0": 10, "w1": 5}),
                counter("switchboard_generation_tokens", {"w0": 7, "w1": 1}),
            ],
            MODEL,
            None,
        )
    )
    assert found["sglang:prompt_tokens"].samples == [
        Sample("sglang:prompt_tokens_total", {"model_name": MODEL}, 15.0)
    ]
    assert found["sglang:generation_tokens"].samples[0].value == 8.0
    assert "sglang:num_running_reqs" not in found  # no load snapshot yet


def test_histograms_keep_their_buckets_and_count_requests() -> None:
    e2e = histogram(
        "switchboard_e2e_request_latency_seconds",
        {"w0": [1, 3, 4], "w1": [0, 2, 2]},
        {"w0": 2.5, "w1": 1.0},
    )
    found = by_name(sglang_families([e2e], MODEL, None))
    samples = {
        (sample.name, sample.labels.get("le")): sample.value
        for sample in found["sglang:e2e_request_latency_seconds"].samples
    }
    assert samples == {
        ("sglang:e2e_request_latency_seconds_bucket", "0.1"): 1.0,
        ("sglang:e2e_request_latency_seconds_bucket", "1.0"): 5.0,
        ("sglang:e2e_request_latency_seconds_bucket", "+Inf"): 6.0,
        ("sglang:e2e_request_latency_seconds_sum", None): 3.5,
        ("sglang:e2e_request_latency_seconds_count", None): 6.0,
    }
    assert found["sglang:num_requests"].samples[0].value == 6.0
    assert "sglang:time_to_first_token_seconds" not in found


def test_engine_gauges_come_from_the_load_snapshot() -> None:
    load = LoadSnapshot(running=3, waiting=2, token_usage=0.25, tokens_per_s=120.5)
    found = by_name(sglang_families([], MODEL, load))
    values = {name: family.samples[0].value for name, family in found.items()}
    assert values == {
        "sglang:num_running_reqs": 3.0,
        "sglang:num_queue_reqs": 2.0,
        "sglang:token_usage": 0.25,
        "sglang:gen_throughput": 120.5,
        "sglang:cache_hit_rate": 0.0,
    }
    assert all(family.samples[0].labels == {"model_name": MODEL} for family in found.values())


def documented_families() -> dict[str, tuple[str, str]]:
    """docs/metrics.md's table of SGLang's names: name -> (type, the "from" column)."""
    text = (Path(__file__).parents[4] / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text.split("## SGLang's names on the serving port", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`sglang:"):
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def test_the_docs_table_is_what_the_route_exports() -> None:
    """Every family the route can export is in docs/metrics.md with its type and source,
    and nothing else is; the source named is the family it is computed from."""
    sources = [
        counter("switchboard_prompt_tokens", {"w0": 1}),
        counter("switchboard_generation_tokens", {"w0": 1}),
        *(
            histogram(f"switchboard_{name}", {"w0": [0, 1, 1]}, {"w0": 0.5})
            for name in (
                "time_to_first_token_seconds",
                "inter_token_latency_seconds",
                "e2e_request_latency_seconds",
            )
        ),
    ]
    exported = sglang_families(sources, MODEL, LoadSnapshot(running=1))
    names = {
        f"{family.name}_total" if family.type == "counter" else family.name: family.type
        for family in exported
    }
    documented = documented_families()
    assert {name: kind for name, (kind, _) in documented.items()} == names
    for source in sources:
        alone = sglang_families([source], MODEL, None)
        assert alone, source.name
        for family in alone:
            name = f"{family.name}_total" if family.type == "counter" else family.name
            assert source.name in documented[name][1], (name, source.name)
