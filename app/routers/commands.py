"""``/api/commands``: the command catalogue, so a client (the console) offers each
command the catalogue gives it, at the path it names, to the role it needs."""

from __future__ import annotations

from fastapi import APIRouter

from app.catalogue import COMMANDS, command
from app.errors import error_responses
from app.models import CommandList
from app.routers.binding import bind
from app.views import commands_of

__all__ = ["router"]

router = APIRouter(tags=["commands"])

#: The catalogue does not change while the app runs.
_LISTED = commands_of(COMMANDS)


@bind(router, command("commands"), response_model=CommandList, responses=error_responses(401))
async def list_commands() -> CommandList:
    """Every command: method, path, role, arguments, and its CLI and console names."""
    return _LISTED
