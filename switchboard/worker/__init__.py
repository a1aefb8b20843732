"""The HTTP worker: FastAPI endpoints (SGLang-native and OpenAI-compatible) over a worker link.

N worker processes share one port (SO_REUSEPORT); each tokenizes, sends requests through
:class:`router_core.worker_link.WorkerLink` and streams the text its detokenizers send
back. The HTTP code never touches ZeroMQ.
"""

from switchboard.worker.app import create_app
from switchboard.worker.settings import WorkerSettings

__all__ = ["WorkerSettings", "create_app"]
