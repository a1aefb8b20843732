"""The tokenizer router's shell: sockets, the poll loop and time around its core.

Forward path: a worker's request is forwarded to the engine on the strength of its
header alone; payload frames pass through untouched (:mod:`forward`). When the engine's
socket is full the router stops reading requests (ZeroMQ then pushes back on the
workers) rather than dropping any; worker control traffic has its own socket and keeps
flowing.

A router with a state file reads it at start (the pause state, drain marks and
operation counter its predecessor saved), takes an incarnation above the saved one,
saves at once, and saves again on every :class:`Persist` effect, before the broadcasts
that follow it.

Everything else is decided by :class:`~router_core.tokenizer_router.core.RouterCore`:
each inbound message is validated (header, frame count), handed with the time to the
core's table for its socket, and the effects the handler returns are carried out here,
in order: sends (counted once sent), answers to waiting control callers, closing the
sockets of departed workers, freezing GC. Whatever does not fit the protocol is counted
under ``rejected`` with a reason and the loop goes on.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from router_core import tracing
from router_core.control.curve_socket import open_control_curve
from router_core.control.guard import OPEN_CONTROL, ControlGuard
from router_core.control.server import ControlServer
from router_core.control.table import Command, ReplyTo
from router_core.destinations import Destination, DestinationSet
from router_core.inbound import drain
from router_core.loop import LoopResources, PollLoop
from router_core.tokenizer_router.backward import SPLIT_SPAN
from router_core.tokenizer_router.commands import COMMANDS, RouterCommand
from router_core.tokenizer_router.core import RouterCore
from router_core.tokenizer_router.dispatch import InboundTable
from router_core.tokenizer_router.durable import StateFile, next_incarnation
from router_core.tokenizer_router.effects import (
    Answer,
    Effect,
    Fail,
    Forget,
    FreezeGarbageCollector,
    Instant,
    Persist,
    Send,
)
from router_core.tokenizer_router.forward import ForwardHop
from router_core.tokenizer_router.settings import RouterSettings
from router_core.traffic import message_bytes
from router_core.transport import FrameLike
from router_core.wire import Header
from router_core.wire.control import ENGINE
from router_core.zap import ZapHandler

__all__ = ["ENGINE", "TokenizerRouter"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _OpenRouter:
    """What exists while the router runs: its destinations and its control server."""

    workers: DestinationSet
    engine: Destination
    control: ControlServer[TokenizerRouter]


class TokenizerRouter:
    """Runs in one thread: :meth:`run` opens the sockets, loops, and closes them.

    Nothing happens in ``__init__`` beyond building the (socket-free) core;
    :meth:`request_stop` may be called from a signal handler or another thread. The
    control socket is guarded by ``control_guard`` (default: ``settings.key``, no audit
    log); a given guard must hold that same key.
    """

    def __init__(
        self,
        settings: RouterSettings,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        *,
        control_guard: ControlGuard | None = None,
    ) -> None:
        self.settings = settings
        self._context = context
        self._zap: ZapHandler | None = None
        self._control_guard = control_guard or ControlGuard(
            key=settings.key, role="tokenizer_router"
        )
        self._state_file = (
            None if settings.state_file is None else StateFile(Path(settings.state_file))
        )
        restored = None if self._state_file is None else self._state_file.load()
        self.core = RouterCore(
            settings,
            started=_now(),
            connect=self._connectable,
            backlogs=self._backlogs,
            incarnation=next_incarnation(restored, time.time_ns()),
            restored=restored,
        )
        self._restored = restored
        self._loop = PollLoop()
        self._open: _OpenRouter | None = None
        self._appliers: Mapping[type[Any], Callable[[Any], None]] = {
            Send: self._send,
            Answer: self._answer,
            Fail: self._fail,
            Forget: self._forget,
            FreezeGarbageCollector: self._freeze_gc,
            Persist: self._persist,
        }

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self) -> None:
        """Stop after the current iteration; safe from signal handlers."""
        self._loop.request_stop()

    def run(self) -> None:
        """Bind, serve until stopped, then drain destinations and close everything."""
        endpoints, core = self.settings.endpoints, self.core
        with LoopResources(self.settings, core.counters, self._context) as resources:
            workers = resources.destinations()
            engine = resources.destinations().get(ENGINE, endpoints.engine)
            requests_in = resources.bind(zmq.PULL, endpoints.requests)
            workers_in = resources.bind(zmq.PULL, endpoints.workers)
            engine_events = resources.bind(zmq.PULL, endpoints.engine_events)
            outputs_in = resources.bind(zmq.PULL, endpoints.outputs)
            control_socket = resources.bind(
                zmq.ROUTER, endpoints.control, self._control_curve(resources.context)
            )
            engine.socket  # noqa: B018  (connect now: a bad endpoint fails the start)
            control = ControlServer(
                control_socket, self, self._command_table(), core.counters, self._control_guard
            )
            self._open = _OpenRouter(workers, engine, control)
            forward = ForwardHop(engine, core.counters, core.traffic, core.worker_label)
            self._loop.watch(
                requests_in, lambda: forward.drain(requests_in), gate=lambda: not engine.backlog
            )
            self._watch(workers_in, core.worker_messages)
            self._watch(engine_events, core.engine_events)
            self._loop.watch(outputs_in, lambda: drain(outputs_in, self._on_output, core.counters))
            self._loop.watch(control_socket, control.handle_ready)
            self._log_restored()
            if self._control_guard.key is None:
                logger.warning(OPEN_CONTROL, endpoints.control)
            if not core.peers.authenticated:
                logger.warning(
                    "tokenizer router has no stack key: any local process that can reach "
                    "its sockets can register as a worker, speak for the engine and send "
                    "beacons; give --run-dir (stack.key in it) or --key-file to require the key"
                )
            self._persist(core.persist())  # this incarnation, before anything is sent
            logger.info(
                "tokenizer router serving in pid %d, incarnation %d",
                os.getpid(),
                core.incarnation,
            )
            try:
                self._loop.run(resources.backlogged, self._tick)
            finally:
                self._open = None
                if self._zap is not None:
                    self._zap.close()
                logger.info("tokenizer router stopped")

    def _control_curve(
        self, context: zmq.Context[zmq.Socket[bytes]]
    ) -> Callable[[zmq.Socket[bytes]], None] | None:
        """With CURVE on the control socket (:mod:`router_core.control.curve_socket`): its
        ZAP handler opened and what makes the socket a CURVE server; None without."""
        pair, path = self.settings.control_key_pair, self.settings.control_authorised_keys
        if pair is None or path is None:
            return None
        prepare, self._zap = open_control_curve(
            context, pair, path, self.core.counters, self._loop.watch
        )
        return prepare

    def _log_restored(self) -> None:
        restored = self._restored
        if restored is not None:
            logger.info(
                "tokenizer router restored %s (op %s, %d drained) from %s",
                f"paused ({restored.mode})" if restored.paused else "not paused",
                restored.op_id or "none",
                len(restored.drained),
                self.settings.state_file,
            )

    def _watch(self, sock: zmq.Socket[bytes], table: InboundTable) -> None:
        def on_message(header: Header, frames: list[FrameLike]) -> None:
            self._apply(table.dispatch(header, frames, _now()))

        self._loop.watch(sock, lambda: drain(sock, on_message, self.core.counters))

    def _on_output(self, header: Header, frames: list[FrameLike]) -> None:
        """Outputs back to the workers, inside one split span when the batch is traced."""
        with tracing.batch_span_if_traced(SPLIT_SPAN, header.row_traces):
            self._apply(self.core.outputs.dispatch(header, frames, _now()))

    def _tick(self, now: float) -> float | None:
        # Every loop iteration: only a timer that is due costs more than a comparison.
        due = self.core.next_due()
        if now < due:
            return due
        effects, due = self.core.tick(Instant(now, time.time()))
        self._apply(effects)
        return due

    # ------------------------------------------------------------------ commands

    def _command_table(self) -> dict[str, Command[TokenizerRouter]]:
        return {name: self._serving(entry) for name, entry in COMMANDS.items()}

    def _serving(self, entry: RouterCommand) -> Command[TokenizerRouter]:
        """The control server's entry for ``entry``: run it, carry out its effects, reply."""

        def serve(router: TokenizerRouter, args: Any, reply_to: ReplyTo) -> Any:
            handled = entry.handler(router.core, args, reply_to, _now())
            router._apply(handled.effects)
            return handled.reply

        return Command.serving(entry.command, serve)

    # ------------------------------------------------------------------ effects

    def _apply(self, effects: Sequence[Effect]) -> None:
        appliers = self._appliers
        for effect in effects:
            appliers[type(effect)](effect)

    def _send(self, send: Send) -> None:
        opened = self._opened()
        if send.once:
            opened.workers.send_once(send.to, send.frames)
            return
        destination = opened.engine if send.to == ENGINE else opened.workers.get(send.to)
        if not destination.send(send.frames):
            return
        if send.traffic is not None:
            route, worker = send.traffic
            self.core.traffic.add(route, worker, 1, message_bytes(send.frames))
        if send.counter is not None:
            self.core.counters.add(*send.counter)

    def _answer(self, answer: Answer) -> None:
        self._opened().control.answer(answer.waiter, answer.outcome)

    def _fail(self, fail: Fail) -> None:
        self._opened().control.fail(fail.waiter, fail.code, fail.message)

    def _forget(self, forget: Forget) -> None:
        self._opened().workers.discard(forget.address, forget.reason)

    def _freeze_gc(self, _: FreezeGarbageCollector) -> None:
        gc.freeze()

    def _persist(self, persist: Persist) -> None:
        """Save the state; a failure is logged and counted, and the router goes on (its
        memory is still right; only a restart would lose the change)."""
        if self._state_file is None:
            return
        try:
            self._state_file.save(persist.state)
        except OSError as exc:
            logger.error("router state file %s not saved: %s", self._state_file.path, exc)
            self.core.counters.add("state_file_errors", "save")
            return
        self.core.counters.add("state_saves", "ok")

    # ------------------------------------------------------------------ probes

    def _opened(self) -> _OpenRouter:
        if self._open is None:
            raise RuntimeError("the tokenizer router is not running")
        return self._open

    def _connectable(self, address: str) -> bool:
        """Connect the worker's destination now; False if libzmq refuses the address."""
        workers = self._opened().workers
        try:
            workers.get(address).socket  # noqa: B018  (connects, or raises)
        except zmq.ZMQError:
            workers.discard(address, "connect_failed")
            return False
        return True

    def _backlogs(self) -> dict[str, int]:
        """Messages queued per destination (worker addresses and ``engine``)."""
        if self._open is None:
            return {}
        return {**self._open.workers.backlog_sizes(), ENGINE: len(self._open.engine.backlog)}


def _now() -> Instant:
    return Instant(time.monotonic(), time.time())
