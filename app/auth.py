"""Who a request comes from, from its ``Authorization`` header alone.

One check for both places that make it: the route dependencies of :mod:`app.deps` and
:class:`app.guard.MutationGuard`, which decides before a mutation's body is read.
"""

from __future__ import annotations

from app.catalogue import Role
from app.errors import ApiException
from app.tokens import Principal, TokenTable

__all__ = ["CHALLENGE", "authenticate", "authorize", "bearer_credentials", "permit"]

#: Sent with every 401.
CHALLENGE = {"WWW-Authenticate": "Bearer"}


def bearer_credentials(header: str | None) -> str | None:
    """The token of ``Authorization: Bearer <token>`` (scheme case-insensitive), or None
    for no header, another scheme or an empty token."""
    if not header:
        return None
    scheme, _, credentials = header.partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials:
        return None
    return credentials


def authenticate(tokens: TokenTable, header: str | None) -> Principal:
    """The principal whose token ``header`` carries; ApiException 401 ``unauthorized``
    for no token or one nobody has."""
    credentials = bearer_credentials(header)
    if credentials is None:
        raise ApiException(401, "unauthorized", "send Authorization: Bearer <token>", CHALLENGE)
    principal = tokens.identify(credentials)
    if principal is None:
        raise ApiException(401, "unauthorized", "unknown token", CHALLENGE)
    return principal


def permit(principal: Principal, role: Role) -> Principal:
    """``principal`` if it may act as ``role``; ApiException 403 ``forbidden`` for a
    viewer where an operator is needed."""
    if role == "operator" and not principal.can_operate:
        raise ApiException(
            403, "forbidden", f"{principal.name} is a viewer; this needs an operator"
        )
    return principal


def authorize(tokens: TokenTable, header: str | None, role: Role) -> Principal:
    """:func:`authenticate`, then :func:`permit` for ``role``."""
    return permit(authenticate(tokens, header), role)
