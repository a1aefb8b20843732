"""Checks made before anything starts: the port is free, the run directory short enough."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from switchboard.supervisor.preflight import check_port_free, check_run_dir
from switchboard.supervisor.settings import SettingsError


class TestPreflight:
    """Checks made before anything starts."""

    def test_port_in_use_is_refused(self) -> None:
        """A port with a listener (even one using SO_REUSEPORT) is reported in use."""
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            with pytest.raises(SettingsError, match="already in use"):
                check_port_free("127.0.0.1", port)
        check_port_free("127.0.0.1", port)

    def test_run_dir_too_deep_for_ipc(self, tmp_path: Path) -> None:
        """A run directory whose socket paths exceed the kernel's limit is refused."""
        with pytest.raises(SettingsError, match="too long"):
            check_run_dir(tmp_path / ("d" * 120))
