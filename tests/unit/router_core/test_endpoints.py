"""Tests for endpoint checking (loopback only by default) and the run-directory layouts."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from router_core.endpoints import (
    DetokenizerRouterEndpoints,
    EndpointError,
    EngineEndpoints,
    RouterEndpoints,
    check_endpoint,
    worker_address,
)


class TestCheckEndpoint:
    """check_endpoint: known schemes only, TCP on loopback unless allow_remote."""

    @pytest.mark.parametrize(
        "endpoint",
        [
            "ipc:///tmp/sb/router",
            "inproc://control",
            "tcp://127.0.0.1:5555",
            "tcp://127.0.0.1:*",
            "tcp://127.8.9.10:5555",
            "tcp://[::1]:5555",
            "tcp://localhost:5555",
        ],
    )
    def test_accepts_local_endpoints(self, endpoint: str) -> None:
        """ipc, inproc and loopback TCP are returned unchanged."""
        assert check_endpoint(endpoint) == endpoint

    @pytest.mark.parametrize(
        "endpoint",
        [
            "tcp://0.0.0.0:5555",
            "tcp://*:5555",
            "tcp://[::]:5555",
            "tcp://10.0.0.1:5555",
            "tcp://192.168.1.2:5555",
            "tcp://eth0:5555",
            "tcp://example.com:5555",
            "tcp://127.0.0.1",
        ],
    )
    def test_refuses_beyond_loopback(self, endpoint: str) -> None:
        """Wildcards, private and public addresses, interface and host names are refused."""
        with pytest.raises(EndpointError, match="loopback"):
            check_endpoint(endpoint)

    @pytest.mark.parametrize(
        "endpoint", ["udp://127.0.0.1:5555", "pgm://x", "IPC:///tmp/x", "/tmp/sock", ""]
    )
    def test_refuses_unknown_schemes(self, endpoint: str) -> None:
        """Anything but ipc://, tcp:// and inproc:// is refused, even with allow_remote."""
        with pytest.raises(EndpointError, match="expected one of"):
            check_endpoint(endpoint, allow_remote=True)

    @pytest.mark.parametrize("endpoint", ["tcp://0.0.0.0:5555", "tcp://*:1", "tcp://10.1.2.3:9"])
    def test_allow_remote(self, endpoint: str) -> None:
        """allow_remote lifts the loopback rule."""
        assert check_endpoint(endpoint, allow_remote=True) == endpoint

    def test_endpoint_error_is_a_value_error(self) -> None:
        """EndpointError is a ValueError, so configuration validation catches it."""
        assert issubclass(EndpointError, ValueError)


class TestLayouts:
    """The default ipc layouts in one run directory."""

    def test_worker_address(self, tmp_path: Path) -> None:
        """A worker's default return address is worker-<id> in the run dir."""
        assert worker_address(tmp_path, "7") == f"ipc://{tmp_path}/worker-7"
        assert worker_address(str(tmp_path), "7") == worker_address(tmp_path, "7")

    def test_router_layout(self, tmp_path: Path) -> None:
        """Every router endpoint is a distinct ipc file inside the run dir."""
        endpoints = RouterEndpoints.in_run_dir(tmp_path)
        values = [getattr(endpoints, name) for name in endpoints.__struct_fields__]
        assert endpoints.workers == f"ipc://{tmp_path}/router-workers"
        assert endpoints.control == f"ipc://{tmp_path}/router-control"
        assert endpoints.engine == f"ipc://{tmp_path}/engine"
        assert len(set(values)) == len(values) == 6
        assert all(v.startswith(f"ipc://{tmp_path}/") and check_endpoint(v) for v in values)

    def test_detokenizer_router_layout(self, tmp_path: Path) -> None:
        """One ipc endpoint per detokenizer, numbered from 0, plus inbound and control."""
        endpoints = DetokenizerRouterEndpoints.in_run_dir(tmp_path, 3)
        assert endpoints.detokenizers == [f"ipc://{tmp_path}/detokenizer-{i}" for i in range(3)]
        assert endpoints.inbound == f"ipc://{tmp_path}/detok-router-in"
        assert endpoints.control == f"ipc://{tmp_path}/detok-router-control"

    def test_layouts_roundtrip_through_msgspec(self, tmp_path: Path) -> None:
        """The layouts are plain structs that encode and decode unchanged."""
        endpoints = RouterEndpoints.in_run_dir(tmp_path)
        encoded = msgspec.json.encode(endpoints)
        assert msgspec.json.decode(encoded, type=RouterEndpoints) == endpoints


class TestEngineEndpoints:
    """EngineEndpoints: the engine's side of the routers' run-directory layout."""

    def test_default_points_at_the_detokenizer_router(self) -> None:
        """inbound/events are the router's engine/engine_events; outputs the detok inbound."""
        ep = EngineEndpoints.in_run_dir("/run/sb")
        router = RouterEndpoints.in_run_dir("/run/sb")
        assert ep.inbound == router.engine == "ipc:///run/sb/engine"
        assert ep.events == router.engine_events
        assert ep.outputs == DetokenizerRouterEndpoints.in_run_dir("/run/sb", 2).inbound

    def test_outputs_via_router(self) -> None:
        """outputs_via='router' sends outputs to the tokenizer router's outputs."""
        ep = EngineEndpoints.in_run_dir(Path("/run/sb"), outputs_via="router")
        assert ep.outputs == RouterEndpoints.in_run_dir("/run/sb").outputs

    def test_unknown_route_refused(self) -> None:
        """Any other outputs_via is a ValueError."""
        with pytest.raises(ValueError, match="outputs_via"):
            EngineEndpoints.in_run_dir("/run/sb", outputs_via="sideways")  # type: ignore[arg-type]

    def test_frozen(self) -> None:
        """Endpoints cannot be changed after creation."""
        ep = EngineEndpoints.in_run_dir("/run/sb")
        with pytest.raises(AttributeError):
            ep.inbound = "ipc:///elsewhere"  # type: ignore[misc]
