"""Typed control calls against real routers: every catalogued command's reply decodes as
its reply type, and the typed reply is the same map the untyped call returns."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from router_core.control import command_args as cargs
from router_core.control import commands as spec
from router_core.control.replies import OperationOutcome, RouterStatus, WorkerView
from tests.integration.harness import Stack

pytestmark = pytest.mark.integration

#: Arguments for each tokenizer router command; pause and continue run a real barrier.
_ARGS: dict[str, msgspec.Struct] = {
    "list_workers": cargs.ListWorkersArgs(include_departed=True),
    "get_worker": cargs.WorkerArgs(worker_id="w0"),
    "pause": cargs.PauseArgs(mode="in_place", timeout_s=5.0),
    "continue": cargs.ContinueArgs(timeout_s=5.0),
    "drain": cargs.WorkerArgs(worker_id="w0"),
    "undrain": cargs.WorkerArgs(worker_id="w0"),
    "abort": cargs.AbortArgs(rid="no-such-request"),
    "flush_cache": cargs.FlushCacheArgs(timeout_s=5.0),
    "update_weights": cargs.UpdateWeightsArgs(version="typed-1", mode="in_place", timeout_s=5.0),
}

#: Fields that move between two calls made a moment apart.
_MOVING = {"uptime_s", "age_s", "last_heartbeat_s_ago", "elapsed_s", "finished_at", "counters"}


def _same_shape(typed: Any, raw: Any) -> None:
    """``typed`` encodes to the keys ``raw`` has, recursively (values that move aside)."""
    encoded = msgspec.to_builtins(typed)
    if isinstance(raw, dict):
        assert set(encoded) == set(raw)
        for key, value in raw.items():
            if key not in _MOVING:
                _same_shape(encoded[key], value)  # by its wire name (a struct may rename)
    elif isinstance(raw, list) and raw and isinstance(raw[0], dict):
        assert len(encoded) == len(raw)
        for typed_item, raw_item in zip(encoded, raw, strict=True):
            _same_shape(typed_item, raw_item)


class TestTypedReplies:
    """ControlClient.request against a running tokenizer and detokenizer router."""

    def test_every_tokenizer_router_command_decodes_as_its_type(self, stack: Stack) -> None:
        """Each of the ten commands, with a worker and a live engine, answers its type."""
        router = stack.start_router()
        stack.start_worker("w0")
        stack.start_builtin_engine(wait_live=router)
        client = router.control
        replies = {
            name: client.request(command, _ARGS.get(name))
            for name, command in spec.TOKENIZER_ROUTER_COMMANDS.items()
        }
        assert isinstance(replies["status"], RouterStatus)
        assert isinstance(replies["get_worker"], WorkerView)
        assert all(isinstance(view, WorkerView) for view in replies["list_workers"])
        pause, resume = replies["pause"], replies["continue"]
        assert isinstance(pause, OperationOutcome) and isinstance(resume, OperationOutcome)
        assert pause.complete and pause.acked == ["engine", "w0"]
        assert replies["load"] is not None and replies["load"].max_running > 0
        assert replies["metrics"].engine.up is True
        for name in ("status", "list_workers", "get_worker", "load", "freeze_gc", "metrics"):
            command = spec.TOKENIZER_ROUTER_COMMANDS[name]
            raw = client._call(name, **msgspec.to_builtins(_ARGS.get(name) or cargs.NoArgs()))
            _same_shape(client.request(command, _ARGS.get(name)), raw)

    def test_detokenizer_router_commands_decode_as_their_types(self, stack: Stack) -> None:
        """status and metrics of the detokenizer router answer their types."""
        detok = stack.start_detok_router(2)
        status = detok.control.request(spec.DETOK_STATUS)
        metrics = detok.control.request(spec.DETOK_METRICS)
        assert (status.role, status.detokenizers) == ("detokenizer_router", 2)
        assert metrics.process == "detokenizer_router" and metrics.backlog_messages == 0
        _same_shape(detok.control.request(spec.DETOK_STATUS), detok.control._call("status"))
