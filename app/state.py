"""What the app's lifespan owns, handed to route handlers through :mod:`app.deps`."""

from __future__ import annotations

from dataclasses import dataclass

from app.events import EventHub
from app.metrics import HostMetrics
from app.poller import EventPoller
from app.router_api import RouterApi
from app.settings import AdminSettings

__all__ = ["AdminState"]


@dataclass
class AdminState:
    """The settings, the router's typed client, the event hub, its poller and the host's
    metrics."""

    settings: AdminSettings
    router: RouterApi
    hub: EventHub
    poller: EventPoller
    metrics: HostMetrics
