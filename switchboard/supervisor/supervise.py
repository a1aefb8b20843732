"""The supervisor: start the stack in order, watch and restart children, stop on a signal."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TextIO

from httpkit.serving import listen_socket
from router_core.credentials import KeyFileError, read_key
from router_core.endpoints import RouterEndpoints
from switchboard.supervisor.admin import AdminAccess, admin_access
from switchboard.supervisor.backoff import RestartBackoff
from switchboard.supervisor.children import Child, describe_exit
from switchboard.supervisor.engine_command import VOCAB_FILE
from switchboard.supervisor.engine_settings import engine_description, served_tokenizer
from switchboard.supervisor.layout import (
    ROLE_ORDER,
    START_GROUPS,
    admin_url,
    child_environment,
    http_url,
    stack_layout,
)
from switchboard.supervisor.metrics_dir import MetricsDirectory
from switchboard.supervisor.readiness import (
    Probes,
    StartupAborted,
    StartupFailed,
    wait_until_ready,
)
from switchboard.supervisor.rundir import RunDirectory
from switchboard.supervisor.settings import StackSettings
from switchboard.supervisor.shutdown import drain_workers, stop_children
from switchboard.supervisor.stop_budget import StopBudget
from switchboard.text import TextCodec, TokenizerLoadError, load_tokenizer
from switchboard.text.vocab_file import write_vocab_file
from switchboard.worker.settings import LEAVE_PORT_SIGNAL, LISTEN_BACKLOG

__all__ = ["Supervisor"]

log = logging.getLogger("switchboard.supervisor")

#: Signals this close together are one request to stop (see Supervisor.request_stop).
SAME_SIGNAL_S = 1.0

#: How often the watch loop looks at the children.
_WATCH_INTERVAL_S = 0.1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


class Supervisor:
    """Runs one stack in the foreground until SIGTERM, SIGINT or SIGHUP.

    :meth:`run` starts the children group by group (router; detokenizer router and
    admin app; detokenizers; engine; workers), waiting for each group to be ready;
    prints one
    line to ``out`` saying where the stack serves; restarts any child that exits with
    :class:`RestartBackoff` delays; and on the first signal drains the workers and stops
    everything in reverse order. A second signal skips what is left of the waiting.
    ``run_dir`` must be open (its fresh stack key in it: every child reads it, and the
    supervisor's own control requests carry it); the supervisor closes it when it stops. With
    ``settings.metrics`` it owns ``<run dir>/metrics`` (:class:`MetricsDirectory`): made
    empty before the first child starts, a child's live gauges retired whenever it exits,
    removed at the end. ``on_serving`` is called with the serving line once it is printed
    (a detached supervisor records it for its starter; the line it prints, into its log,
    leaves a generated token out). Nothing happens before :meth:`run`.
    """

    def __init__(
        self,
        settings: StackSettings,
        run_dir: RunDirectory,
        out: TextIO = sys.stdout,
        tokenizer: TextCodec | None = None,
        on_serving: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_serving = on_serving
        self.run_dir = run_dir
        #: The workers' tokenizer as preflight loaded it (None: loaded when needed).
        self.tokenizer = tokenizer
        self.out = out
        self.children: list[Child] = []
        self._stop = threading.Event()
        self._hurry = threading.Event()
        self.metrics_dir = MetricsDirectory(run_dir.path / "metrics") if settings.metrics else None
        self._env = child_environment(
            os.environ,
            metrics_dir=None if self.metrics_dir is None else self.metrics_dir.path,
            otlp_endpoint=settings.otlp_endpoint,
        )
        #: The admin app's tokens, settled (perhaps generated) when :meth:`run` starts.
        self.admin: AdminAccess | None = None
        #: The workers' one listening socket, which each inherits: a worker that drains
        #: or restarts leaves what is queued on it to its siblings.
        self._listener: socket.socket | None = None
        self._budget: StopBudget | None = None
        self._stop_asked = 0.0

    def request_stop(self) -> None:
        """Begin stopping; a second call skips the remaining waits (signal-safe).

        The stop's budget (:class:`StopBudget`) runs from the first call. A second call
        within :data:`SAME_SIGNAL_S` of the first is the same request arriving twice, not
        an operator's second Ctrl-C: a terminal signals the whole process group and
        ``make run`` forwards what it got to the supervisor as well.
        """
        now = time.monotonic()
        if self._budget is None:
            self._budget = self._new_budget()
        elif self._stop.is_set() and now - self._stop_asked >= SAME_SIGNAL_S:
            self._hurry.set()
        if not self._stop.is_set():
            self._stop_asked = now
        self._stop.set()

    def _new_budget(self) -> StopBudget:
        settings = self.settings
        return StopBudget.starting(
            time.monotonic(),
            grace_s=settings.stop_grace_s,
            drain_timeout_s=settings.drain_timeout_s,
            graceful_timeout_s=settings.graceful_timeout_s,
            stop_timeout_s=settings.stop_timeout_s,
        )

    def _stop_budget(self) -> StopBudget:
        """The running stop's budget; one from now when no signal began it (a failed start)."""
        if self._budget is None:
            self._budget = self._new_budget()
        return self._budget

    def run(self) -> int:
        """Run the stack until asked to stop; the exit status (0, or 1 if startup failed)."""
        settings = self.settings
        path = self.run_dir.path
        backoff = (
            settings.restart_backoff_initial_s,
            settings.restart_backoff_max_s,
            settings.restart_reset_after_s,
        )
        probes: Probes | None = None
        with self._signals_handled():
            try:
                if self.metrics_dir is not None:
                    try:
                        self.metrics_dir.prepare()
                    except OSError as exc:
                        log.error("cannot make the metrics directory: %s", exc)
                        return 1
                try:
                    key = read_key(self.run_dir.key_file)  # written by RunDirectory.open
                except KeyFileError as exc:
                    log.error("cannot read the stack key: %s", exc)
                    return 1
                self.admin = admin_access(settings)
                if settings.role != "control":
                    try:
                        self._listener = listen_socket(
                            settings.host, settings.port, reuse_port=True, backlog=LISTEN_BACKLOG
                        )
                    except OSError as exc:
                        log.error("cannot listen on %s: %s", settings.port, exc)
                        return 1
                listen_fd = None if self._listener is None else self._listener.fileno()
                layout = stack_layout(
                    settings,
                    path,
                    os.getpid(),
                    self.admin.environment(),
                    key=key,
                    listen_fd=listen_fd,
                )
                self.children = [Child(spec, RestartBackoff(*backoff)) for spec in layout]
                self._remove_state_files()  # a new stack starts from no one's state
                own_engine = settings.role != "workers"
                if own_engine and settings.engine == "command" and not self._write_vocab():
                    return 1
                router_control = RouterEndpoints.in_run_dir(path).control
                probes = Probes(router_control, http_url(settings.host, settings.port), key)
                return self._serve(probes)
            finally:
                self._stop_all()
                if self._listener is not None:
                    self._listener.close()  # what is still queued there is reset
                if probes is not None:
                    probes.close()
                if self.metrics_dir is not None:
                    self.metrics_dir.remove()
                self._remove_state_files()
                self.run_dir.close(f for child in self.children for f in child.spec.socket_files)
                log.info("stopped; run dir %s", "removed" if self.run_dir.temporary else "cleaned")

    def _write_vocab(self) -> bool:
        """Write the workers' vocabulary for an engine command (SWITCHBOARD_VOCAB_FILE);
        False, logged, when it cannot be."""
        path = self.run_dir.path / VOCAB_FILE
        try:
            codec = self.tokenizer or load_tokenizer(served_tokenizer(self.settings))
            write_vocab_file(codec, path)
        except (TokenizerLoadError, OSError) as exc:
            log.error("cannot write the vocabulary file %s: %s", path, exc)
            return False
        return True

    def _remove_state_files(self) -> None:
        for child in self.children:
            for path in child.spec.state_files:
                path.unlink(missing_ok=True)

    def _serve(self, probes: Probes) -> int:
        try:
            self._start_all(probes)
        except StartupAborted:
            log.info("asked to stop while starting")
            return 0
        except StartupFailed as exc:
            log.error("startup failed: %s", exc)
            return 1
        line = self.serving_line()
        if self.on_serving is None:
            print(line, file=self.out, flush=True)
        else:
            # Detached, stdout is <run dir>/supervisor.log, which outlives the stack and
            # `switchboard logs` prints: a generated token reaches only the starter,
            # through the private record.
            print(self.serving_line(with_token=False), file=self.out, flush=True)
            self.on_serving(line)
        self._watch()
        workers = [child for child in self.children if child.spec.role == "worker"]
        self._give_up_the_port(workers)
        router = next((child for child in self.children if child.spec.role == "router"), None)
        if router is not None:
            drain_s = self._stop_budget().drain_s(time.monotonic())
            drain_workers(probes, workers, router, drain_s, self._hurry.is_set)
        # A worker host sees no router: each worker, on SIGTERM, takes no new request,
        # deregisters and lets what it holds finish (graceful_timeout_s), by itself.
        return 0

    def _give_up_the_port(self, workers: list[Child]) -> None:
        """The whole stack stops: close the workers' listening socket here and tell each
        worker (:data:`~switchboard.worker.settings.LEAVE_PORT_SIGNAL`) to let go of it
        too once it stops taking connections, so that the socket closes and new clients
        are refused at once rather than left queued with no one to accept them."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for child in workers:
            child.send(LEAVE_PORT_SIGNAL)

    def serving_line(self, *, with_token: bool = True) -> str:
        """The one line printed once the stack is ready (stdout only: with a generated
        admin token it carries the token, unless ``with_token`` is False)."""
        settings = self.settings
        if settings.role == "workers":
            return (
                f"switchboard: serving {http_url(settings.host, settings.port)} "
                f"({_plural(settings.workers, 'worker')} of the stack at {settings.control}); "
                f"run dir {self.run_dir.path}; Ctrl-C to stop"
            )
        access = self.admin or admin_access(settings)
        if settings.role == "control":
            serving = f"switchboard: control host; workers join at {settings.gateway_listen} ("
        else:
            serving = (
                f"switchboard: serving {http_url(settings.host, settings.port)} "
                f"({_plural(settings.workers, 'worker')}, "
            )
        return (
            f"{serving}{_plural(settings.detokenizers, 'detokenizer')}, "
            f"{engine_description(settings)}); "
            f"console {access.console_url(admin_url(settings), with_token=with_token)}; "
            f"run dir {self.run_dir.path}; Ctrl-C to stop"
        )

    def _start_all(self, probes: Probes) -> None:
        generated = self.admin is not None and self.admin.generated is not None
        if self.settings.role != "workers":
            log.info(
                "admin app on %s (%s)",
                admin_url(self.settings),
                "operator token generated: the console URL is on stdout"
                if generated
                else "configured tokens",
            )
        deadline = time.monotonic() + self.settings.startup_timeout_s
        for roles in START_GROUPS:
            group = [child for child in self.children if child.spec.role in roles]
            if not group:
                continue  # a role this host does not run
            for child in group:
                try:
                    pid = child.start(self._env)
                except OSError as exc:
                    raise StartupFailed(f"cannot start {child.name}: {exc}") from exc
                log.info("started %s (pid %d)", child.name, pid)
            wait_until_ready(group, probes, deadline, self._stop.is_set)
            log.info("ready: %s", ", ".join(child.name for child in group))

    def _watch(self) -> None:
        """Restart children that exit, until a stop is requested."""
        while not self._stop.is_set():
            now = time.monotonic()
            for child in self.children:
                if child.restart_at is None:
                    code = child.poll()
                    if code is not None:
                        self._schedule_restart(child, code, now)
                elif now >= child.restart_at:
                    self._restart(child, now)
            self._stop.wait(_WATCH_INTERVAL_S)

    def _restart(self, child: Child, now: float) -> None:
        old_pid = child.pid
        try:
            pid = child.start(self._env)
        except OSError as exc:
            # Out of processes or memory for a moment: try again after a longer delay.
            delay = child.backoff.next_delay(0.0)
            child.restart_at = now + delay
            log.error("cannot restart %s (%s); trying again in %.1f s", child.name, exc, delay)
            return
        child.restarts += 1
        log.warning(
            "restarted %s: pid %d (was %s; restart %d)", child.name, pid, old_pid, child.restarts
        )

    def _schedule_restart(self, child: Child, code: int, now: float) -> None:
        if self.metrics_dir is not None and child.pid is not None:
            # Before the restart: its in-flight gauge must not outlive it.
            self.metrics_dir.retire(child.pid)
        child.sweep()
        uptime = child.uptime()
        delay = child.backoff.next_delay(uptime)
        child.restart_at = now + delay
        log.warning(
            "%s (pid %s) exited unexpectedly (%s) after %.1f s; restarting in %.1f s%s",
            child.name,
            child.pid,
            describe_exit(code),
            uptime,
            delay,
            child.exit_context(wait_s=0.2),
        )

    def _stop_all(self) -> None:
        budget = self._stop_budget()
        for role in reversed(ROLE_ORDER):
            group = [child for child in self.children if child.spec.role == role]
            if any(child.alive() for child in group):
                timeout = budget.group_s(role, time.monotonic())
                stop_children(group, timeout, self._hurry.is_set)

    @contextmanager
    def _signals_handled(self) -> Iterator[None]:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.request_stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
