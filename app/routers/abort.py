"""``/api/abort``: abort one request in the engine by its id, or every request.

``POST /abort_request`` is SGLang's name for the same (its ``AbortReq`` body: ``rid``,
``abort_all``). The router tells the engine on behalf of every registered worker (it does
not know which one owns the id), so the answer says whom it told, not whether ``rid`` was
in flight; a request that was ends with finish reason abort, its client answered.
"""

from __future__ import annotations

from fastapi import APIRouter

from app.catalogue import command
from app.deps import Note, Router
from app.errors import error_responses
from app.models import AbortRequest, AbortResult
from app.routers.binding import bind

__all__ = ["router"]

router = APIRouter(tags=["requests"])

ABORT = command("abort")
_RESPONSES = error_responses(400, 401, 403, 503)


async def _abort(note: Note, control: Router, body: AbortRequest | None) -> AbortResult:
    request = body or AbortRequest()
    target = "all" if request.abort_all else f"rid={request.rid}"
    note.detail = target
    result = await control.abort(request.rid, abort_all=request.abort_all, by=note.who)
    note.detail = f"{target} sent_for={','.join(result.sent_for) or '-'}"
    return result


@bind(router, ABORT, response_model=AbortResult, responses=_RESPONSES)
async def abort(note: Note, control: Router, body: AbortRequest | None = None) -> AbortResult:
    """Abort ``rid`` in the engine, or with ``abort_all`` every request: each ends with
    finish reason abort (message ``aborted by an operator``). 400 for neither."""
    return await _abort(note, control, body)


@bind(router, ABORT, path="/abort_request", response_model=AbortResult, responses=_RESPONSES)
async def abort_request(
    note: Note, control: Router, body: AbortRequest | None = None
) -> AbortResult:
    """SGLang's name for ``POST /api/abort`` (its ``AbortReq`` body)."""
    return await _abort(note, control, body)
