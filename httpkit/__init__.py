"""HTTP serving helpers shared by the worker and the admin app.

:mod:`httpkit.serving` binds the listening socket and runs uvicorn on it until a stop
signal; :mod:`httpkit.spans` makes one server span per request and names requests by
their route template; :mod:`httpkit.body_limit` refuses a request body over a size limit
with the app's own answer. The package knows no zmq and neither of its users: the admin app
(:mod:`app`) and the HTTP worker (:mod:`switchboard.worker`) both import it, never the
other way round.
"""

__all__: list[str] = []
