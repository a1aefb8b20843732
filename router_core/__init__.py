"""Switchboard's ZeroMQ routing fabric.

``router_core`` knows nothing of HTTP: the admin app and the CLI reach a running router
through :class:`router_core.control.ControlClient`.
"""
