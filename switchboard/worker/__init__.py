"""The HTTP worker: FastAPI endpoints (SGLang-native and OpenAI-compatible) over a worker link.

N worker processes share one port (SO_REUSEPORT); each tokenizes, sends requests through
:class:`router_core.worker_link.WorkerLink` and streams the text its detokenizers send
back. The HTTP code never touches ZeroMQ. The app factory is
:func:`switchboard.worker.app.create_app`; importing this package alone loads no HTTP
framework, so the command line stays quick to start for every other process.
"""
