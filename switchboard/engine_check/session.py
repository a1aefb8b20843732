"""What every check shares: the harness, the key, the tokenizer, the engine process and
what earlier checks learnt (the first run, the ops applied).

A :class:`Session` sends requests as a worker would (its own return address in every
header's ``reply_to``) and gathers their rows (:func:`~switchboard.engine_check.rows.gather`);
it sends PAUSE and CONTINUE with router-shaped op ids and waits for their ACKs. Every
wait is bounded by ``timeout_s``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from router_core.wire import Kind
from router_core.wire.control import ContinueRequest, PauseMode, PauseRequest
from router_core.wire.requests import AbortRequest, GenerateRequest, SamplingParams
from switchboard.engine_check.engine_process import EngineProcess
from switchboard.engine_check.harness import Harness
from switchboard.engine_check.rows import RequestRun, gather
from switchboard.engine_check.verdicts import Problem, ack_problems, ended_before, op_id
from switchboard.text import TextCodec

__all__ = [
    "BASE_PROMPT",
    "LONG_PROMPT",
    "LONG_TOKENS",
    "MAX_LONG_TOKENS",
    "SHORT_TOKENS",
    "TOO_FAST",
    "Baseline",
    "Session",
]

#: The first run's prompt text (tokenized with the checked tokenizer).
BASE_PROMPT: Final = "The quick brown fox jumps over the lazy dog"
#: The prompt of requests that must still be running when a command arrives: long, so
#: that an engine that echoes its prompt (and ends with it) runs long enough too.
LONG_PROMPT: Final = " ".join([BASE_PROMPT] * 8)
#: max_new_tokens of the first run and of most checks.
SHORT_TOKENS: Final = 16
#: max_new_tokens of requests that must still be running when a command arrives, at
#: first; four times more each time one finished first, up to :data:`MAX_LONG_TOKENS`.
LONG_TOKENS: Final = 256
MAX_LONG_TOKENS: Final = 2048
#: Why a check that needs a running request is not run when the request finished first.
TOO_FAST: Final = "a request finished before the command arrived (the engine is too fast to tell)"


@dataclass(frozen=True)
class Baseline:
    """A prompt's greedy run alone: what later runs of the same prompt must repeat."""

    prompt: list[int]
    params: SamplingParams
    run: RequestRun


@dataclass
class Session:
    """State shared by the checks of one engine-check run."""

    harness: Harness
    key: str
    codec: TextCodec
    address: str
    timeout_s: float
    process: EngineProcess | None = None
    incarnation: int = field(default_factory=time.time_ns)
    baseline: Baseline | None = None
    #: The first run's rows conform, so runs can be compared id for id.
    rows_ok: bool = False
    #: The engine's clock (header sent_ns) on the last ACK :meth:`command` waited for.
    last_ack_sent_ns: int = 0
    #: The first run got no row at all (none reached engine-check's return address).
    silent: bool = False
    #: max_new_tokens of requests that must still run when a command arrives.
    long_tokens: int = LONG_TOKENS
    #: The long prompt's run alone, per max_new_tokens.
    long_baselines: dict[int, Baseline] = field(default_factory=dict)
    #: Every CONTINUE sent by the pause checks: what was wrong with it ([]: conforms).
    continues: list[list[Problem]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _commands: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _rids: itertools.count[int] = field(default_factory=itertools.count)
    _sent_at: dict[str, int] = field(default_factory=dict)

    def prompt(self, text: str = BASE_PROMPT) -> list[int]:
        """``text``'s ids, without the EOS id (a prompt must not end a run by itself)."""
        eos = self.codec.eos_token_id
        return [token for token in self.codec.encode(text) if token != eos]

    def greedy(self, max_new_tokens: int = SHORT_TOKENS, **extra: object) -> SamplingParams:
        """Greedy sampling params (temperature 0), with ``extra`` fields set."""
        params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0)
        return msgspec.structs.replace(params, **extra)

    def new_rid(self, label: str) -> str:
        """A request id no earlier request of this session used."""
        return f"check-{label}-{next(self._rids)}"

    def generate(self, label: str, prompt: Sequence[int], params: SamplingParams) -> str:
        """Send one GENERATE; its rid."""
        rid = self.new_rid(label)
        request = GenerateRequest(
            rid=rid, input_ids=list(prompt), sampling_params=params, stream=True
        )
        self._sent_at[rid] = len(self.harness.inbox.outputs)
        self.harness.send(Kind.GENERATE, request, rid=rid, reply_to=self.address)
        return rid

    def abort(self, rid: str | None) -> None:
        """ABORT ``rid``, or (None) every request of this session's address."""
        payload = AbortRequest(rid=rid or "", abort_all=rid is None, reason="engine-check")
        self.harness.send(Kind.ABORT, payload, rid=rid, reply_to=self.address)

    def runs(self, rids: Sequence[str]) -> list[RequestRun]:
        """The runs of ``rids`` from every output row received so far."""
        # Only what arrived since the first of them was sent can be theirs.
        since = min((self._sent_at.get(rid, 0) for rid in rids), default=0)
        messages = self.harness.output_messages(since)
        return [gather(rid, self.address, messages) for rid in rids]

    def wait_rows(self, rids: Sequence[str], rows: int = 1) -> bool:
        """Wait until each of ``rids`` has ``rows`` rows or has finished."""
        return self.harness.wait(
            lambda: all(run.rows >= rows or run.finished for run in self.runs(rids)),
            self.timeout_s,
        )

    def wait_finished(self, rids: Sequence[str]) -> list[RequestRun]:
        """Wait until every one of ``rids`` has finished (or the bound); their runs."""
        self.harness.wait(lambda: all(run.finished for run in self.runs(rids)), self.timeout_s)
        return self.runs(rids)

    def run(self, label: str, prompt: Sequence[int], params: SamplingParams) -> RequestRun:
        """Send one GENERATE and wait for it to finish; its run."""
        return self.wait_finished([self.generate(label, prompt, params)])[0]

    def start_long(self, label: str, count: int) -> list[str] | str:
        """Start ``count`` long requests and wait for a row of each: their rids, or why the
        check cannot go on (a request finished first, or got no row). A request that
        finishes first makes every later long request longer, and this is tried again."""
        if self.silent:
            return "the first request got no row: none to wait for here"
        for _ in range(2):
            prompt = self.prompt(LONG_PROMPT)
            params = self.greedy(self.long_tokens)
            rids = [self.generate(label, prompt, params) for _ in range(count)]
            self.wait_rows(rids)
            runs = self.runs(rids)
            if not any(run.finished for run in runs):
                break
            for run in runs:
                if not run.finished:
                    self.abort(run.rid)
            self.wait_finished(rids)
            if not self.lengthen():
                break
        if any(run.finished for run in runs):
            return TOO_FAST
        if not all(run.rows for run in runs):
            return f"a request got no row within {self.timeout_s:g} s"
        return rids

    def interrupt(
        self,
        label: str,
        count: int,
        command: Callable[[list[str]], list[Problem]],
        undo: Callable[[], object] = lambda: None,
    ) -> tuple[list[RequestRun], list[Problem]] | str:
        """Start ``count`` long requests, send ``command(rids)`` while they run, and wait
        for them to finish: their runs and what ``command`` found wrong; or why not.

        A request that ended on its own before the command could reach the engine
        (:func:`.verdicts.ended_before`) tells nothing: requests are made longer and it is
        tried again (``undo()`` first), then it is ``TOO_FAST``."""
        for _ in range(2):
            rids = self.start_long(label, count)
            if isinstance(rids, str):
                return rids
            sent_ns = time.time_ns()
            problems = command(rids)
            runs = self.wait_finished(rids)
            if not any(ended_before(run, sent_ns) for run in runs):
                return runs, problems
            undo()
            if not self.lengthen():
                break
        return TOO_FAST

    def lengthen(self) -> bool:
        """Make long requests longer (one finished before its command arrived); False
        if they are as long as they get."""
        if self.long_tokens >= MAX_LONG_TOKENS:
            return False
        self.long_tokens = min(self.long_tokens * 4, MAX_LONG_TOKENS)
        return True

    def next_op(self) -> str:
        """A new operation id, newer than every one before it."""
        return op_id(self.incarnation, next(self._seq))

    def next_command_op(self) -> str:
        """A new engine command's op id, ``e<incarnation>-<n>`` as a router's (never the
        shape of a barrier op's, protocol.md 3.11)."""
        return f"e{self.incarnation}-{next(self._commands)}"

    def command(self, mode: PauseMode | None, op: str | None = None) -> tuple[str, list[Problem]]:
        """Send PAUSE in ``mode`` (CONTINUE for None) with ``op`` (default a new op id)
        and wait for its ACK; the op id and what was wrong ([]: acked as it must be)."""
        op = op or self.next_op()
        since = len(self.harness.inbox.events)  # an op sent again is acked again
        self.last_ack_sent_ns = 0
        if mode is None:
            self.harness.send(Kind.CONTINUE, ContinueRequest(op_id=op))
        else:
            self.harness.send(Kind.PAUSE, PauseRequest(op_id=op, mode=mode))
        if not self.harness.wait(lambda: bool(self.harness.acks(op, since)), self.timeout_s):
            what = "CONTINUE" if mode is None else f"PAUSE {mode}"
            return op, [
                (
                    f"no ACK for {what} {op} within {self.timeout_s:g} s",
                    "apply every PAUSE and CONTINUE, then send ACK {op_id, participant: "
                    '"engine", secret: key} on events (protocol.md 3.4, 5.7)',
                )
            ]
        self.last_ack_sent_ns = self.harness.ack_sent_ns(op, since)
        return op, ack_problems(self.harness.acks(op, since)[0], self.key)

    def engine_gone(self) -> str | None:
        """Why the engine cannot be checked any more (it exited), or None."""
        if self.process is None:
            return None
        status = self.process.exit_status()
        if status is None:
            return None
        lines = self.process.last_lines()
        return f"the engine exited with status {status}" + (f": {lines}" if lines else "")
