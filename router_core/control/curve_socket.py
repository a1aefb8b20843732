"""CURVE on a router's control socket, which a ``tcp://`` control endpoint requires.

A control socket on ``ipc://`` in the private run directory is out of other users'
reach; one on ``tcp://`` is reachable by any process that reaches the port, so a router
refuses it without CURVE (:func:`router_core.curve.check_control_curve`). With CURVE, a
ZAP handler in the router's context lets in only the client keys of an authorised-keys
file (reread when it changes) and counts every refusal (:func:`open_control_curve`); the
stack key is checked beneath, as on ``ipc://``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import zmq

from router_core.counters import Counters
from router_core.curve import AuthorisedKeys, KeyPair
from router_core.zap import ZapHandler, curve_server

__all__ = ["open_control_curve"]


def open_control_curve(
    context: zmq.Context[zmq.Socket[bytes]],
    pair: KeyPair,
    authorised: str,
    counters: Counters,
    watch: Callable[[zmq.Socket[bytes], Callable[[], None]], None],
) -> tuple[Callable[[zmq.Socket[bytes]], None], ZapHandler]:
    """Open the ZAP handler in ``context`` (watched through ``watch``; the caller closes
    it) and return what makes the control socket, before its bind, a CURVE server.

    Raises :class:`~router_core.credentials.KeyFileError` for an unusable keys file.
    """
    keys = AuthorisedKeys(Path(authorised), on_invalid=lambda: counters.add("keys_file", "invalid"))
    keys.load()
    zap = ZapHandler(context, keys, counters)
    zap.open()
    watch(zap.socket, zap.handle_ready)
    return (lambda sock: curve_server(sock, pair)), zap
