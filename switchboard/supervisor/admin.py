"""The admin app's tokens under ``switchboard up``: configured, or one generated operator token.

The tokens reach the admin app through its environment (never its command line, which
``ps`` shows to every user). A generated token is shown once, in the console URL on the
serving line (stdout; a detached supervisor's stdout is its log, so there the line says
the token is not logged and only its starter prints it), and never logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.tokens import GENERATED_TOKEN_NAME, NamedToken, format_tokens, generate_token
from switchboard.supervisor.settings import StackSettings

__all__ = ["OPERATOR_TOKENS_ENV", "VIEWER_TOKENS_ENV", "AdminAccess", "admin_access"]

OPERATOR_TOKENS_ENV = "SWITCHBOARD_ADMIN_OPERATOR_TOKENS"
VIEWER_TOKENS_ENV = "SWITCHBOARD_ADMIN_VIEWER_TOKENS"


@dataclass(frozen=True)
class AdminAccess:
    """The tokens the admin app accepts, and the one generated here (if any)."""

    operators: tuple[NamedToken, ...]
    viewers: tuple[NamedToken, ...] = ()
    generated: str | None = field(default=None, repr=False)

    def environment(self) -> dict[str, str]:
        """The admin app's token variables."""
        env = {OPERATOR_TOKENS_ENV: format_tokens(self.operators)}
        if self.viewers:
            env[VIEWER_TOKENS_ENV] = format_tokens(self.viewers)
        return env

    def console_url(self, admin_url: str, *, with_token: bool = True) -> str:
        """The console's URL; with a generated token, carrying it in the fragment (which
        browsers keep to themselves: it reaches no server log), or, ``with_token`` False,
        saying that it was generated and is not shown."""
        url = f"{admin_url}/"
        if not self.generated:
            return url
        return (
            f"{url}#token={self.generated}"
            if with_token
            else f"{url} (token generated, not logged)"
        )


def admin_access(settings: StackSettings) -> AdminAccess:
    """The configured tokens; with none at all, one generated operator token (``console``)."""
    tokens = settings.admin_tokens()
    if not tokens.empty:
        return AdminAccess(tokens.operators, tokens.viewers)
    token = generate_token()
    return AdminAccess((NamedToken(GENERATED_TOKEN_NAME, token),), generated=token)
