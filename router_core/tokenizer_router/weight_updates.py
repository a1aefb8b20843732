"""Live weight updates: one barrier that pauses, has the engine load, and continues.

:meth:`WeightUpdates.start` runs ``update_weights`` as three steps, each bounded by the
command's ``timeout_s``: a pause of every worker and the engine in the chosen mode; the
engine's ``ENGINE_COMMAND update_weights`` (it loads ``model`` as ``version``); and a
continue — unless generation was paused before the update, which it then leaves paused.
The caller is answered once, after the last step: the new version with both
operations, or an error naming the step that failed and why. A load that fails leaves
the old weights serving and still continues; a pause that does not complete changes no
weights. One update runs at a time.

What outlives the router: the version serving (saved once the engine loaded it), and
whether an update that paused generation still owes the continue (``resume_owed``): a
router killed mid-update leaves that mark, and its successor continues once the engine
is live again (:meth:`tick`). The engine is the truth about what it serves: a version
its load snapshot reports that differs from the saved one, while no update runs, is
adopted (:meth:`on_engine_version`). Pure: time comes in as an :class:`Instant`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import msgspec

from router_core.control.command_args import UpdateWeightsArgs
from router_core.control.commands import UPDATE_WEIGHTS
from router_core.control.protocol import ControlError, ErrorCode
from router_core.control.replies import OperationOutcome, UpdateWeightsReply, WeightsLoaded
from router_core.control.table import ReplyTo
from router_core.counters import Counters
from router_core.tokenizer_router.effects import Answer, Effect, Fail, Instant, Persist
from router_core.tokenizer_router.engine_events import EngineState
from router_core.tokenizer_router.engine_requests import EngineRequests
from router_core.tokenizer_router.pause import PauseCoordinator
from router_core.wire.engine_commands import CommandReply

__all__ = ["WeightUpdates"]

#: The control error each refusal code of an engine's load becomes.
_LOAD_CODES: Final = {
    "conflict": ErrorCode.CONFLICT,
    "bad_arguments": ErrorCode.BAD_ARGUMENTS,
}


@dataclass
class _Update:
    args: UpdateWeightsArgs
    waiter: ReplyTo | None
    started: float
    resume: bool
    previous: str
    paused: OperationOutcome | None = None
    resumed: OperationOutcome | None = None
    #: The failure to report, once generation is back as it was.
    error: tuple[ErrorCode, str] | None = None


class WeightUpdates:
    """The weights serving and the update in progress (see the module docstring)."""

    def __init__(
        self,
        pause: PauseCoordinator,
        requests: EngineRequests,
        engine: EngineState,
        counters: Counters,
        *,
        persist: Callable[[], Persist],
        version: str = "",
        model: str = "",
        resume_owed: bool = False,
    ) -> None:
        self._pause = pause
        self._requests = requests
        self._engine = engine
        self._counters = counters
        self._persist = persist
        self.version = version
        self.model = model
        self.resume_owed = resume_owed
        self._active: _Update | None = None

    @property
    def active(self) -> bool:
        return self._active is not None

    def start(self, args: UpdateWeightsArgs, waiter: ReplyTo | None, at: Instant) -> list[Effect]:
        """Begin an update; CONFLICT while one runs, ENGINE_FAILED without a live engine."""
        if self._active is not None:
            going = self._active.args.version or self._active.args.model or "the engine's own"
            raise ControlError(
                ErrorCode.CONFLICT, f"update_weights: an update to {going} is in progress"
            )
        if not self._engine.is_live(at.mono):
            raise ControlError(ErrorCode.ENGINE_FAILED, "update_weights: no engine is live")
        resume = not self._pause.state.paused
        update = _Update(args, waiter, at.mono, resume, self.version)
        self._active = update
        self.resume_owed = resume
        self._counters.add("weight_updates", "started")
        op, effects = self._pause.start(
            is_pause=True, mode=args.mode, timeout_s=args.timeout_s, waiter=self._paused, at=at
        )
        effects.insert(0, self._persist())  # the pause state and the owed continue, first
        if op.complete:  # nobody to wait for
            effects += self._paused(self._pause.outcome_of(op, at), at)
        return effects

    def tick(self, at: Instant) -> list[Effect]:
        """Continue generation for an update a previous router left half done."""
        if not self.resume_owed or self._active is not None or not self._engine.is_live(at.mono):
            return []
        self.resume_owed = False
        self._counters.add("weight_updates", "resumed_after_restart")
        _, effects = self._pause.start(
            is_pause=False, mode=None, timeout_s=None, waiter=None, at=at
        )
        return [self._persist(), *effects]

    def on_engine_version(self, version: str) -> list[Effect]:
        """The engine reports serving ``version``: adopted if no update runs and it differs
        (a router that restarted mid-load, or an engine restarted on its own weights)."""
        if self._active is not None or version == self.version:
            return []
        self._counters.add("weight_updates", "adopted_from_engine")
        # The file behind a version the engine reports is not known here: never the
        # file of the version it replaces.
        self.version, self.model = version, ""
        return [self._persist()]

    # ------------------------------------------------------------------ the steps

    def _paused(self, outcome: OperationOutcome, at: Instant) -> list[Effect]:
        update = self._active
        assert update is not None
        update.paused = outcome
        if not outcome.complete:
            stragglers = ", ".join(outcome.stragglers) or "-"
            update.error = (
                ErrorCode.ENGINE_TIMEOUT,
                f"not everyone paused within {update.args.timeout_s:g} s (stragglers: "
                f"{stragglers}); the weights were not changed",
            )
            return self._resume(at)
        return self._requests.start(UPDATE_WEIGHTS, update.args, self._loaded, at)

    def _loaded(self, reply: CommandReply | None, problem: str, at: Instant) -> list[Effect]:
        update = self._active
        assert update is not None
        effects: list[Effect] = []
        target = update.args.model or update.args.version or "the engine's own weights"
        if reply is None or not reply.ok:
            code = ErrorCode.ENGINE_FAILED
            if reply is not None:
                code = _LOAD_CODES.get(reply.code or "", ErrorCode.ENGINE_FAILED)
                problem = reply.message or "the engine gave no reason"
            serving = self.version or "the engine's own"
            update.error = (code, f"{target}: {problem}; the old weights ({serving}) serve on")
            self._counters.add("weight_updates", "load_failed")
        else:
            try:
                loaded = msgspec.convert(reply.result, WeightsLoaded)
            except msgspec.ValidationError as exc:
                update.error = (ErrorCode.ENGINE_FAILED, f"the engine's answer is wrong: {exc}")
            else:
                self.version, self.model = loaded.version, loaded.model
                effects.append(self._persist())  # before the continue announces them
        return effects + self._resume(at)

    def _resume(self, at: Instant) -> list[Effect]:
        update = self._active
        assert update is not None
        if not update.resume:
            return self._finish(at)
        self.resume_owed = False
        op, effects = self._pause.start(
            is_pause=False, mode=None, timeout_s=update.args.timeout_s, waiter=self._resumed, at=at
        )
        effects.insert(0, self._persist())
        if op.complete:
            effects += self._resumed(self._pause.outcome_of(op, at), at)
        return effects

    def _resumed(self, outcome: OperationOutcome, at: Instant) -> list[Effect]:
        update = self._active
        assert update is not None
        update.resumed = outcome
        return self._finish(at)

    def _finish(self, at: Instant) -> list[Effect]:
        update, self._active = self._active, None
        assert update is not None and update.paused is not None
        if update.error is not None:
            code, message = update.error
            after = "; generation resumed" if update.resume else "; generation stays paused"
            self._counters.add("weight_updates", "failed")
            if update.waiter is None:
                return []
            return [Fail(update.waiter, code, f"update_weights: {message}{after}")]
        self._counters.add("weight_updates", "done")
        if update.waiter is None:
            return []
        reply = UpdateWeightsReply(
            version=self.version,
            model=self.model,
            previous_version=update.previous,
            paused=update.paused,
            resumed=update.resumed,
            elapsed_s=round(at.mono - update.started, 3),
        )
        return [Answer(update.waiter, reply)]
