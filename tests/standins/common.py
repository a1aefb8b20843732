"""What the stand-in processes share: stop on SIGTERM, die with the test, report to it.

A stand-in reports its observations as MessagePack maps PUSHed to a socket the test
owns (``--report-endpoint``); the test reads them with
:class:`tests.integration.harness.ReportCollector`.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from types import FrameType
from typing import Any

import msgspec
import zmq

from router_core.credentials import resolve_key
from router_core.process import die_with_parent

__all__ = ["Reporter", "StopFlag", "add_common_arguments", "stack_key", "start_common"]

_ENCODER = msgspec.msgpack.Encoder()


class StopFlag:
    """Set by SIGTERM or SIGINT; the stand-in's loop checks it every poll."""

    def __init__(self) -> None:
        self.stopping = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True


class Reporter:
    """PUSHes observation maps to the test; never blocks (a full queue drops a report)."""

    def __init__(
        self, context: zmq.Context[zmq.Socket[bytes]], endpoint: str, role: str, name: str
    ):
        self.socket = context.socket(zmq.PUSH)
        # Long enough for the final report to leave after a clean stop.
        self.socket.setsockopt(zmq.LINGER, 1000)
        self.socket.setsockopt(zmq.SNDHWM, 1000)
        self.socket.connect(endpoint)
        self.role = role
        self.name = name
        self.seq = 0
        self.dropped = 0

    def send(self, observations: dict[str, Any]) -> None:
        """Send one report, stamped with role, name, pid, sequence and monotonic time."""
        self.seq += 1
        report = {
            "role": self.role,
            "id": self.name,
            "pid": os.getpid(),
            "report_seq": self.seq,
            "mono": time.monotonic(),
            "reports_dropped": self.dropped,
            **observations,
        }
        try:
            self.socket.send(_ENCODER.encode(report), zmq.NOBLOCK)
        except zmq.Again:
            self.dropped += 1

    def close(self) -> None:
        """Close, letting queued reports leave within the linger period."""
        self.socket.close()


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments every stand-in takes."""
    parser.add_argument("--run-dir", required=True, help="the run directory of the stack")
    parser.add_argument("--report-endpoint", required=True, help="the test's report PULL")
    parser.add_argument("--report-interval", type=float, default=0.05)
    parser.add_argument("--parent-pid", type=int, help="exit when this process dies")
    parser.add_argument(
        "--no-key", action="store_true", help="send no stack key (as a peer without it would)"
    )


def stack_key(args: argparse.Namespace) -> str:
    """The stack key the stand-in presents: the run directory's (made if missing), or
    ``""`` with ``--no-key``."""
    return "" if args.no_key else resolve_key(None, args.run_dir) or ""


def start_common(args: argparse.Namespace) -> StopFlag:
    """Install the stop flag and the parent-death signal."""
    flag = StopFlag()
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    return flag
