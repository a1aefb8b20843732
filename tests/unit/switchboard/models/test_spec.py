"""ModelSpec: the named sizes, their parameter counts, and what a spec refuses."""

from __future__ import annotations

import dataclasses

import pytest

from switchboard.models.spec import BENCH, SPECS, TINY, ModelSpec


class TestNamedSpecs:
    """TINY and BENCH are what the tests and benchmarks are sized for."""

    def test_specs_by_name(self) -> None:
        """``switchboard models build --size`` names each spec by its own name."""
        assert dict(SPECS) == {"tiny": TINY, "bench": BENCH}
        assert all(name == spec.name for name, spec in SPECS.items())

    def test_bench_is_a_small_real_model(self) -> None:
        """BENCH on the 32 000-token llama-spm vocabulary: 8 layers of width 512, ff 1376,
        58 M parameters, 233 MB of f32."""
        assert (BENCH.n_layer, BENCH.n_embd, BENCH.n_ff) == (8, 512, 1376)
        parameters = BENCH.parameter_count(32000)
        assert parameters == 58_073_600
        assert round(parameters * 4 / 1e6) == 232

    def test_tiny_is_tiny(self) -> None:
        """TINY is 2 layers of width 64 with 4 heads of 16."""
        assert (TINY.n_layer, TINY.n_embd, TINY.n_ff, TINY.n_head) == (2, 64, 172, 4)
        assert TINY.head_dim == 16
        assert TINY.parameter_count(32000) < 4_200_000


class TestValidation:
    """A spec llama.cpp could not load, or the recipe could not fill, is refused."""

    @pytest.mark.parametrize(
        ("change", "named"),
        [
            ({"name": "Tiny Model"}, "name"),
            ({"name": ""}, "name"),
            ({"n_layer": 0}, "n_layer"),
            ({"n_embd": -64}, "n_embd"),
            ({"n_ff": 1.5}, "n_ff"),
            ({"n_ctx": True}, "n_ctx"),
            ({"n_head": 3}, "n_embd 64 is not a multiple of n_head 3"),
            ({"n_head_kv": 3}, "n_head 4 is not a multiple of n_head_kv 3"),
            ({"n_embd": 40, "n_head": 8, "n_head_kv": 8}, "head size 5"),
            ({"n_embd": 16, "n_head": 8, "n_head_kv": 8}, "head size 2"),
            ({"rope_theta": 0.0}, "rope_theta"),
            ({"rms_eps": float("nan")}, "rms_eps"),
            ({"rope_theta": "10000"}, "rope_theta"),
            ({"seed": -1}, "seed"),
        ],
    )
    def test_bad_field(self, change: dict[str, object], named: str) -> None:
        """Each bad value is a ValueError whose message names what is wrong."""
        with pytest.raises(ValueError, match=named):
            dataclasses.replace(TINY, **change)  # type: ignore[arg-type]

    def test_grouped_query_attention_is_allowed(self) -> None:
        """Fewer key/value heads than query heads, dividing them, is a valid spec."""
        spec = ModelSpec("gqa", n_layer=1, n_embd=64, n_ff=96, n_head=4, n_head_kv=2, n_ctx=256)
        assert spec.head_dim == 16

    def test_record_names_every_field(self) -> None:
        """as_record is every field by name: what the cache key hashes."""
        record = TINY.as_record()
        assert set(record) == {field.name for field in dataclasses.fields(ModelSpec)}
        assert record["seed"] == TINY.seed
