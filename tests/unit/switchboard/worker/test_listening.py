"""Where a worker listens (switchboard.worker.server.listening) and how the supervisor
hands its workers one socket (switchboard.supervisor.layout: ``--listen-fd``)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from httpkit.serving import listen_socket
from switchboard.supervisor.layout import stack_layout
from switchboard.supervisor.settings import load_settings
from switchboard.worker.server import listening


def test_an_inherited_socket_is_served_through_duplicates() -> None:
    """The worker serves on a duplicate and keeps the inherited socket open, so that
    closing what it served on (leaving the group) leaves the port listening."""
    shared = listen_socket("127.0.0.1", 0, reuse_port=True)
    try:
        served, gate = listening("127.0.0.1", 0, shared.dup().detach())
        assert gate.shared and served.getsockname() == shared.getsockname()
        port = served.getsockname()[1]
        served.close()
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass  # still queued on the shared socket
        gate.release()
    finally:
        shared.close()


def test_a_descriptor_that_is_not_listening_is_refused() -> None:
    plain = socket.socket()
    try:
        with pytest.raises(ValueError, match="is not a listening TCP socket"):
            listening("127.0.0.1", 0, plain.fileno())
        assert plain.fileno() >= 0  # not closed by the refusal: it was not ours
    finally:
        plain.close()


def test_without_a_descriptor_the_worker_binds_its_own() -> None:
    served, gate = listening("127.0.0.1", 0, None)
    try:
        assert not gate.shared
        assert served.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT)
    finally:
        served.close()


def test_the_supervisor_hands_every_worker_the_same_descriptor(tmp_path: Path) -> None:
    specs = stack_layout(load_settings({"workers": 3}), tmp_path, 1, listen_fd=9)
    workers = [spec for spec in specs if spec.role == "worker"]
    assert len(workers) == 3
    for spec in workers:
        assert spec.pass_fds == (9,)
        at = spec.argv.index("--listen-fd")
        assert spec.argv[at + 1] == "9"
    assert all(spec.pass_fds == () for spec in specs if spec.role != "worker")
