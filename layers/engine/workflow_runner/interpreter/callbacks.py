"""Steps an outside system answers through a callback token: wait_for_callback (the
token the pass hands out as `ctx.callback`), create_callback (a token every later step
reads as `ctx.callbacks[name]`) and await_callback (until that one has its answer)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..callback_tokens import token_hash
from ..definition.dsl import AwaitCallback, CreateCallback, WaitForCallback
from ..durations import parse_duration
from ..pass_result import (
    CallbackAnswerErased,
    CallbackFailedError,
    CallbackNotCreated,
    CallbackSecretMissing,
    CallbackWait,
    Suspension,
)
from ..stream import Path, callback_deadline
from .base import PassState, StepFailed, Suspend


def _seconds(heartbeat: str | None) -> int | None:
    return None if heartbeat is None else int(parse_duration(heartbeat).total_seconds())


class CallbackSteps(PassState):
    def _wait_for_callback(self, step: WaitForCallback, path: Path, scope: dict[str, Any]) -> None:
        timeout_at = self._wake_at(self._call(step.timeout, path, scope), path, "timeout")
        heartbeat = _seconds(step.heartbeat)
        beat_at = None if heartbeat is None else self.now + timedelta(seconds=heartbeat)
        hashed = token_hash(self.callback.take())
        callback = CallbackWait(step.result_key, hashed, None, heartbeat, beat_at)
        raise Suspend(Suspension("waiting-for-callback", path, timeout_at, callback=callback))

    def _create_callback(self, step: CreateCallback, path: Path, scope: dict[str, Any]) -> None:
        timeout_at = self._wake_at(self._call(step.timeout, path, scope), path, "timeout")
        try:
            self.callbacks.create(step.name, path, timeout_at, _seconds(step.heartbeat), self.now)
        except CallbackSecretMissing as error:
            raise StepFailed(error, path) from error

    def _await_callback(self, step: AwaitCallback, path: Path, scope: dict[str, Any]) -> None:
        """Take the callback's answer at once when it has one (or None when it expired);
        else suspend until it comes or the callback's deadline passes."""
        known = self.callbacks.find(step.name)
        if known is None:
            raise StepFailed(CallbackNotCreated(step.name, self.callbacks.names()), path)
        key = step.result_key
        if known.event_id is not None:
            if known.answer_erased:
                raise StepFailed(
                    CallbackAnswerErased(f"the answer of callback {step.name!r} was erased"), path
                )
            self._answered(step, path, known.error)
            self._store(key, known.answer)
            self.awaited_refs[key] = known.event_id
            return
        deadline, timer = callback_deadline(
            known.timeout_at, known.heartbeat_seconds, known.last_beat
        )
        if known.closed or self.now >= deadline:
            if not known.closed:  # the answers that come later lose against this
                self.callbacks.closed.append((known.token_hash, timer))
            self._store(key, None)
            self.awaited_refs[key] = None
            return
        beat = known.heartbeat_seconds
        beat_at = None if beat is None else known.last_beat + timedelta(seconds=beat)
        callback = CallbackWait(key, known.token_hash, known.name, beat, beat_at)
        raise Suspend(Suspension("waiting-for-callback", path, known.timeout_at, callback=callback))

    def _answered(
        self, step: WaitForCallback | AwaitCallback, path: Path, error: str | None
    ) -> None:
        """An answer that reported a failure fails the step, unless it catches (its
        result is then `{"failed": true, "error": NAME}`, the answer's payload)."""
        if error is not None and not step.catch:
            raise StepFailed(CallbackFailedError(error), path)

    def _callback_resumed(self, step: WaitForCallback | AwaitCallback, path: Path) -> None:
        """Resumed at a callback wait: its answer (or None) is seeded under its key; a
        failure it answered with fails it unless it catches."""
        self._answered(step, path, self.callback_error)
