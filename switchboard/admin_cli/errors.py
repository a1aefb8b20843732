"""What can go wrong talking to the admin app, each with the exit status it earns.

Every failure the operator commands report is one of these; :func:`switchboard.admin_cli.run`
prints its message as one line on stderr and exits with its ``exit_status``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "AdminCliError",
    "ApiError",
    "AuthFailed",
    "OperationFailed",
    "UnexpectedAnswer",
    "Unreachable",
    "UsageProblem",
]

EXIT_OK = 0
#: The operation failed, timed out, or the API refused it (404, 409, 504, ...).
EXIT_FAILED = 1
#: A bad command line: a bad flag value, URL or token.
EXIT_USAGE = 2
#: The admin app could not be reached, or it refused the token (401, 403).
EXIT_UNAVAILABLE = 3


class AdminCliError(Exception):
    """A failure reported in one line; ``exit_status`` is what the command exits with."""

    exit_status = EXIT_FAILED

    def __init__(self, message: str) -> None:
        # Operators read this on one line: whatever the server wrote, no newlines.
        super().__init__(" ".join(message.split()))

    @property
    def message(self) -> str:
        return str(self)


class UsageProblem(AdminCliError):
    """The command line cannot work (a bad URL, a token no header can carry)."""

    exit_status = EXIT_USAGE


class Unreachable(AdminCliError):
    """No connection to the admin app, or something there that does not speak HTTP."""

    exit_status = EXIT_UNAVAILABLE


class OperationFailed(AdminCliError):
    """The app was reached but the operation did not succeed (or did not answer in time)."""

    exit_status = EXIT_FAILED


class UnexpectedAnswer(OperationFailed):
    """The app answered success with a body that is not what the command asked for."""


class ApiError(OperationFailed):
    """The API answered with an error status; ``code`` is its error code when it gave one."""

    def __init__(self, status: int, code: str | None, message: str, body: Any = None) -> None:
        detail = f"{code}, HTTP {status}" if code else f"HTTP {status}"
        super().__init__(f"{message} ({detail})")
        self.status = status
        self.code = code
        self.body = body


class AuthFailed(ApiError):
    """The app refused the token: none given or unknown (401), or not an operator's (403)."""

    exit_status = EXIT_UNAVAILABLE
