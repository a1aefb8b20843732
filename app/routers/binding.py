"""A route handler bound to its catalogue entry: the entry gives the method, the path and
the role; the handler gives the answer.

``@bind(router, command("pause"))`` serves the handler at ``POST /api/pause`` behind an
operator's token; ``path="/pause_generation"`` serves it at one of the entry's aliases
instead. A handler that needs the caller takes ``who: Caller``; its role was checked before
the handler runs (for an audited command, by :class:`app.guard.MutationGuard` before the
body was read, and again by the route). A handler's body is read as JSON whatever its
``Content-Type`` says (:class:`app.body.JsonBodyRoute`). A mutation's handler writes its
account of what happened in the request's ``Note`` (:mod:`app.deps`); the guard writes
the audit record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from fastapi import APIRouter
from fastapi.params import Depends

from app.body import JsonBodyRoute
from app.catalogue import Command, Role
from app.deps import Operator, Viewer

__all__ = ["Caller", "bind"]

#: The authenticated caller; the route has already checked its role.
Caller = Viewer

Handler = TypeVar("Handler", bound=Callable[..., Any])


def _dependency(alias: Any) -> Depends:
    """The ``Depends`` carried by an ``Annotated[Principal, Depends(...)]`` alias."""
    (dependency,) = alias.__metadata__
    if not isinstance(dependency, Depends):
        raise TypeError(f"{alias!r} does not carry a dependency")
    return dependency


#: The check each role needs: any known token, or an operator's (403 for a viewer's).
_GUARDS: Final[Mapping[Role, Depends]] = {
    "viewer": _dependency(Viewer),
    "operator": _dependency(Operator),
}


def bind(
    router: APIRouter, entry: Command, *, path: str | None = None, **options: Any
) -> Callable[[Handler], Handler]:
    """Serve the decorated handler for ``entry`` at ``path`` (default: its own path; else
    one of its aliases); ``options`` go to FastAPI (response model, responses, ...)."""
    served = entry.path if path is None else path
    if served not in entry.paths:
        raise ValueError(f"{served} is not a path of the {entry.name!r} command")

    def register(handler: Handler) -> Handler:
        router.add_api_route(
            served,
            handler,
            methods=[entry.method],
            dependencies=[_GUARDS[entry.role]],
            route_class_override=JsonBodyRoute,
            **options,
        )
        return handler

    return register
