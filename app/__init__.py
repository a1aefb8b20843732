"""The Switchboard admin app: HTTP API, event stream and operator console for one stack.

``app.main.create_app(settings)`` builds it; ``switchboard admin``
(:mod:`switchboard.cli.admin`) serves it. :mod:`app.tokens` is free of HTTP imports, so
the supervisor validates token lists without loading FastAPI.
"""
