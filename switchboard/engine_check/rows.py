"""A request's output as engine-check sees it: rows gathered, checked against the protocol.

Pure: :func:`gather` reads decoded output messages (header and one-row payloads, in
arrival order) and returns a :class:`RequestRun` for one request, with every breach of
docs/protocol.md sections 3.6, 3.7 and 4 it shows as a :class:`Breach` (a code, what was
seen, and the fix). No sockets, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from router_core.wire import BATCH_KINDS, Header, Kind
from router_core.wire.outputs import BatchEmbeddingOutput

__all__ = [
    "FIXES",
    "Breach",
    "Message",
    "RequestRun",
    "gather",
    "rows_framed_after",
    "shared_messages",
]

#: Breach code -> what the engine must do (one line, naming the docs).
FIXES: Final[dict[str, str]] = {
    "reply_to": "set header.reply_to[i] to the request's header.reply_to[0] (protocol.md 2.2, 4.1)",
    "owner": "set the row's http_worker_ipcs to [the request's reply_to] (protocol.md 3.6)",
    "no_output_ids": "send output_ids in every generation row (protocol.md 3.6)",
    "no_completion_tokens": "send completion_tokens = output tokens so far, this row's "
    "included, in every row (protocol.md 3.7)",
    "continuity": "send only the ids new in each row in output_ids, so each row starts at "
    "completion_tokens - len(output_ids) = the tokens sent before (protocol.md 3.7)",
    "two_finishes": "finish every request with exactly one row whose finished_reasons "
    "entry is not nil (protocol.md 8)",
    "after_finish": "send nothing for a request after its finishing row; forget it (protocol.md 8)",
    "no_finish": "finish every request with one row whose finished_reasons entry is not "
    "nil (protocol.md 3.6, 8)",
}


@dataclass(frozen=True)
class Message:
    """One decoded output message: its header and its one-row payloads, in order."""

    header: Header
    rows: Sequence[msgspec.Struct]


@dataclass(frozen=True)
class Breach:
    """What the protocol was broken by: ``code`` (a key of :data:`FIXES`) and the sight."""

    code: str
    seen: str

    @property
    def fix(self) -> str:
        """The one-line fix of this breach."""
        return FIXES[self.code]


@dataclass
class RequestRun:
    """One request's rows: the ids they carry in order, its finish and what was wrong."""

    rid: str
    ids: list[int] = field(default_factory=list)
    rows: int = 0
    finish: dict[str, Any] | None = None
    #: The ``sent_ns`` of the message with the finishing row (the engine's clock, 0: unset).
    finish_sent_ns: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    stop_holdbacks: set[int] = field(default_factory=set)
    embedding: list[float] | None = None
    kinds: set[Kind] = field(default_factory=set)
    breaches: list[Breach] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Whether a finishing row came."""
        return self.finish is not None

    @property
    def finish_type(self) -> str | None:
        """The finish reason's ``type`` (``length``, ``stop``, ``abort``), if finished."""
        kind = self.finish.get("type") if self.finish is not None else None
        return kind if isinstance(kind, str) else None

    def breach(self, code: str, seen: str) -> None:
        """Record a breach, once per code (the first sight says enough)."""
        if all(each.code != code for each in self.breaches):
            self.breaches.append(Breach(code, seen))


def _column(row: msgspec.Struct, name: str) -> Any:
    """The single entry of column ``name`` of a one-row batch, or None if absent."""
    values = getattr(row, name, None)
    return values[0] if values else None


def _read_row(run: RequestRun, header: Header, row: msgspec.Struct) -> None:
    kind = header.kind
    if run.finished:
        run.breach("after_finish", f"a row after the finishing row {run.finish}")
    run.rows += 1
    run.kinds.add(kind)
    if isinstance(row, BatchEmbeddingOutput):
        vector = _column(row, "embeddings")
        run.embedding = list(vector) if vector is not None else None
    else:
        new = _column(row, "output_ids")
        if getattr(row, "output_ids", None) is None:
            run.breach("no_output_ids", f"row {run.rows} has no output_ids")
            new = []
        count = _column(row, "completion_tokens")
        if count is None:
            run.breach("no_completion_tokens", f"row {run.rows} has no completion_tokens")
        else:
            start = count - len(new)
            if start != len(run.ids):
                run.breach(
                    "continuity",
                    f"row {run.rows} starts at token {start} (completion_tokens {count}, "
                    f"{len(new)} output_ids) after {len(run.ids)} tokens",
                )
            run.completion_tokens = count
        run.ids.extend(new)
        holdback = _column(row, "stop_holdback")
        if holdback is not None:
            run.stop_holdbacks.add(holdback)
    prompt = _column(row, "prompt_tokens")
    if prompt is not None:
        run.prompt_tokens = prompt
    reason = _column(row, "finished_reasons")
    if reason is not None:
        if run.finished:
            run.breach("two_finishes", f"a second finishing row {reason} after {run.finish}")
        else:
            run.finish = dict(reason)
            run.finish_sent_ns = header.sent_ns


def gather(rid: str, address: str, messages: Iterable[Message]) -> RequestRun:
    """The run of request ``rid`` owned by ``address``, from every output message seen."""
    run = RequestRun(rid)
    for message in messages:
        header = message.header
        if header.kind not in BATCH_KINDS:
            continue
        for index, name in enumerate(header.rids):
            if name != rid:
                continue
            if header.reply_to[index] != address:
                run.breach(
                    "reply_to",
                    f"header reply_to[{index}] is {header.reply_to[index]!r}, not {address!r}",
                )
                continue
            row = message.rows[index]
            owners = getattr(row, "http_worker_ipcs", None)
            if owners is not None and list(owners) != [address]:
                run.breach("owner", f"row http_worker_ipcs {owners!r}, not [{address!r}]")
            _read_row(run, header, row)
    return run


def rows_framed_after(rid: str, messages: Iterable[Message], sent_ns: int) -> int:
    """How many rows of ``rid`` came in messages the engine framed after ``sent_ns`` (its
    own clock, header ``sent_ns``): rows it made after that moment, whenever they arrived."""
    return sum(
        message.header.rids.count(rid)
        for message in messages
        if message.header.kind in BATCH_KINDS and message.header.sent_ns > sent_ns
    )


def shared_messages(rids: Iterable[str], messages: Iterable[Message]) -> int:
    """How many messages carry rows of more than one of ``rids``."""
    wanted = set(rids)
    return sum(
        1
        for message in messages
        if message.header.kind in BATCH_KINDS and len(wanted.intersection(message.header.rids)) > 1
    )
