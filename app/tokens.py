"""Bearer tokens: parsing ``name:token`` lists, generating one, and finding who presented one.

Pure (no HTTP), so ``switchboard up`` validates the same lists the admin app accepts
without loading FastAPI. A token value never appears in an error message or a repr.
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "API_KEY_TOKEN_NAME",
    "GENERATED_TOKEN_NAME",
    "MIN_REMOTE_TOKEN_CHARS",
    "NamedToken",
    "Principal",
    "Role",
    "TokenError",
    "TokenTable",
    "api_key_token",
    "check_exposed_tokens",
    "format_tokens",
    "generate_token",
    "parse_tokens",
    "short_tokens",
]

Role = Literal["viewer", "operator"]

#: The name of the operator token generated when none is configured.
GENERATED_TOKEN_NAME = "console"  # noqa: S105 (a name, not a secret)

#: The name of the operator token an API key becomes (``switchboard up --api-key``): what
#: the audit log shows for a command sent with it.
API_KEY_TOKEN_NAME = "api-key"  # noqa: S105 (a name, not a secret)

#: The shortest token an admin app reachable beyond loopback accepts (a generated one
#: has 64 characters). 24 characters of the allowed set are over 128 bits even as hex.
MIN_REMOTE_TOKEN_CHARS = 24

#: Token names go into audit lines unquoted: no spaces, no ``=``.
_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
#: Characters a token may hold (what fits a header and a URL fragment unescaped).
_TOKEN = re.compile(r"^[A-Za-z0-9_.~+/=-]{1,512}$")


class TokenError(ValueError):
    """A token list that cannot be used; the message names the entry, never its token."""


@dataclass(frozen=True)
class NamedToken:
    """One configured token and the name the audit log shows for it."""

    name: str
    token: str = field(repr=False)


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: the token's name and its role."""

    name: str
    role: Role

    @property
    def can_operate(self) -> bool:
        return self.role == "operator"


def parse_tokens(text: str | None, *, what: str = "tokens") -> tuple[NamedToken, ...]:
    """``"alice:tok1,ci:tok2"`` as named tokens; empty or None gives none.

    Entries are separated by commas (whitespace around them is ignored); each is
    ``name:token``. Raises :class:`TokenError` for an entry without a name or a token,
    a name or token with characters outside the allowed sets, or a repeated name.
    """
    found: list[NamedToken] = []
    names: set[str] = set()
    for position, raw in enumerate((text or "").split(","), start=1):
        entry = raw.strip()
        if not entry:
            continue
        name, sep, token = entry.partition(":")
        if not sep or not name or not token:
            raise TokenError(f"{what}: entry {position} is not name:token")
        if not _NAME.match(name):
            raise TokenError(
                f"{what}: entry {position}: name {name!r} may hold only letters, digits "
                "and _ . @ - (at most 64)"
            )
        if not _TOKEN.match(token):
            raise TokenError(
                f"{what}: entry {position} ({name}): the token has characters "
                "outside letters, digits and _ . ~ + / = -"
            )
        if name in names:
            raise TokenError(f"{what}: name {name!r} appears twice")
        names.add(name)
        found.append(NamedToken(name, token))
    return tuple(found)


def api_key_token(key: str, *, what: str = "api_key") -> NamedToken:
    """``key`` as the operator token :data:`API_KEY_TOKEN_NAME`; TokenError, naming
    ``what`` and never the key, for characters a token may not hold."""
    if not _TOKEN.match(key):
        raise TokenError(
            f"{what}: the key has characters outside letters, digits and _ . ~ + / = - "
            "(or is longer than 512)"
        )
    return NamedToken(API_KEY_TOKEN_NAME, key)


def short_tokens(
    tokens: tuple[NamedToken, ...], minimum: int = MIN_REMOTE_TOKEN_CHARS
) -> tuple[str, ...]:
    """The names of ``tokens`` whose token is shorter than ``minimum`` characters."""
    return tuple(item.name for item in tokens if len(item.token) < minimum)


def check_exposed_tokens(
    table: TokenTable, *, operators_setting: str, viewers_setting: str, why: str
) -> None:
    """TokenError naming the setting and the entry of the first token shorter than
    :data:`MIN_REMOTE_TOKEN_CHARS`; for an app that ``why`` (e.g. "listens on 0.0.0.0")
    is reachable beyond loopback."""
    for setting, entries in (
        (operators_setting, table.operators),
        (viewers_setting, table.viewers),
    ):
        short = short_tokens(entries)
        if short:
            raise TokenError(
                f"{setting}: the token of {short[0]!r} is shorter than "
                f"{MIN_REMOTE_TOKEN_CHARS} characters, the least the admin app accepts when "
                f"it {why} (reachable beyond loopback); use a longer one, e.g. from "
                "`openssl rand -hex 32`"
            )


def format_tokens(tokens: tuple[NamedToken, ...]) -> str:
    """The ``name:token,...`` text :func:`parse_tokens` reads back."""
    return ",".join(f"{item.name}:{item.token}" for item in tokens)


def generate_token() -> str:
    """A fresh random token (256 bits, as 64 hex digits)."""
    # Hex, not url-safe base64: a token starting with "-" would read as an option when
    # typed after --token on a command line.
    return secrets.token_hex(32)


@dataclass(frozen=True)
class TokenTable:
    """Every accepted token with its name and role.

    :meth:`identify` compares the presented token with every configured one in
    constant time, so neither a match's position nor a near miss shows in the timing.
    """

    operators: tuple[NamedToken, ...] = ()
    viewers: tuple[NamedToken, ...] = ()

    def __post_init__(self) -> None:
        names = [item.name for item in (*self.operators, *self.viewers)]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise TokenError(f"token name {repeated[0]!r} is both an operator's and a viewer's")
        values = [item.token for item in (*self.operators, *self.viewers)]
        if len(set(values)) != len(values):
            raise TokenError("the same token is configured under two names")

    @property
    def empty(self) -> bool:
        return not self.operators and not self.viewers

    def identify(self, presented: str) -> Principal | None:
        """Whose token ``presented`` is, or None for a token nobody has."""
        given = presented.encode()
        match: Principal | None = None
        roles: tuple[tuple[Role, tuple[NamedToken, ...]], ...] = (
            ("operator", self.operators),
            ("viewer", self.viewers),
        )
        for role, entries in roles:
            for item in entries:
                # Every entry is compared, whatever matched before.
                if hmac.compare_digest(given, item.token.encode()) and match is None:
                    match = Principal(item.name, role)
        return match
