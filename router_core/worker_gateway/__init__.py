"""The worker gateway: workers on other hosts reach the control host through it alone.

See :mod:`.gateway` for what it does, :mod:`.frames` for what remote workers say to it and
:mod:`.core` for its decisions.
"""

from router_core.worker_gateway.settings import GatewaySettings, requests_listen_for

__all__ = ["GatewaySettings", "requests_listen_for"]
