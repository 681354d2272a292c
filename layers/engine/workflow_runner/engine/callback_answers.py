"""Recording what a token brings (a completion, a failure, a heartbeat) on its run's
stream: who may answer, and how one of them wins.

A token is the credential: it alone names the tenant, the run and the callback (looked
up by its SHA-256), so it can never reach another tenant's run or another step's wait.

One writer wins. Whatever changes a callback's standing — an answer, a heartbeat, a
timeout's resume, a pass that closes a created callback or makes its name again — is
written in a transaction that also appends to the run stream at its next version. An
answer reads the run's stream first and the token's row after it, decides from both,
and appends at the version it read: a writer that committed before the stream read is
seen in both; one that committed between the two reads took the version the answer
appends at, so the append loses and the answer reads again; one still in flight holds
that version, so the append waits for it and then loses. So of two answers, or an
answer and a heartbeat, or either and the timeout's resume, exactly one decides first
and the other sees its outcome (or loses and writes nothing). No row lock is taken
ahead of the append: a pass holds its version from its claim on and may close a row,
so such a lock could wait for the pass while the pass waits for it. The one lock taken
ahead is the run's answers lock (`lock_answers`), which only answers and task outcomes
take, first in their transactions and holding nothing else: answers and outcomes reach
the run one after the other (a callback answered while a parallel's tasks end would
otherwise keep losing its version to them), and no pass ever waits for it.

An answer that is recorded is never lost: an answer to the wait the run stands at
marks its pending row due in the same transaction (the pending projection marks it
again when it projects the suspension after the answer, run_due); an answer to a
created callback the run does not wait at yet is kept in its row, where the await
finds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..errors import RunNotFound, TransientStoreError
from ..store import CallbackRow, Store
from ..stream import RUN_STREAM, Fact, RunState, StepWaitingForCallback
from .callback_refusals import (
    CallbackAlreadyCompleted,
    CallbackExpired,
    CallbackNotWaiting,
    UnknownCallback,
)
from .passes import load_run_for_pass

_APPEND_TRIES = 5


@dataclass(frozen=True)
class Appended:
    """Where an answer landed: the suspension open then (its version and step), and
    whether the answer settles it (`run_due`: the run waits for this very callback)."""

    row: CallbackRow
    suspension_version: int
    step_index: int
    run_due: bool


def refuse_unless_open(row: CallbackRow, now: datetime) -> None:
    """Raise the refusal for a token that takes no answer at `now`.

    Raises:
        CallbackAlreadyCompleted: it has its answer (a token is single-use).
        CallbackExpired: its deadline passed (its timeout, or its heartbeats stopped),
            or its wait or await timed out (whatever this caller's clock says).
        CallbackNotWaiting: the run stopped listening to it (an operator moved the run
            on, its name was created again).
    """
    if row.completed_at is not None:
        raise CallbackAlreadyCompleted()
    deadline, timer = row.deadline
    if now >= deadline:
        raise CallbackExpired(deadline, timer)
    if row.closed_at is not None and row.closed_reason in ("timeout", "heartbeat_timeout"):
        raise CallbackExpired(row.closed_at, row.closed_reason)
    if row.closed_at is not None:
        raise CallbackNotWaiting()


def _awaited(state: RunState, row: CallbackRow) -> bool | None:
    """True: the run waits for this very callback (the answer settles its wait);
    False: a created callback the run does not wait for yet (the answer is kept for its
    await); None: the token can no longer be answered (the run moved on)."""
    open_ = state.suspension
    waits_here = (
        isinstance(open_, StepWaitingForCallback)
        and open_.token_hash == row.token_hash
        and state.matched_event_id is None
    )
    if row.name is None:  # a wait_for_callback's token: that very suspension only
        return True if waits_here and state.suspension_version == row.suspension_version else None
    if state.status not in ("waiting", "running"):
        return None
    return waits_here


def append_answer(
    store: Store,
    token_hash: str,
    now: datetime,
    fact: Callable[[Appended], Fact],
    check: Callable[[CallbackRow], None] = lambda row: None,
) -> Appended:
    """Append what `fact` makes of the token's standing to its run's stream, in the
    caller's transaction, once the token takes it (`check`: what this kind of answer
    needs more).

    Raises:
        UnknownCallback: no callback has this token.
        CallbackRefused: see refuse_unless_open; CallbackNotWaiting also when the run
            moved on.
        TransientStoreError: other writers (passes, cancels) took the run's next
            version on every try: nothing was decided, the caller may try again.
    """
    row = store.callbacks.get(token_hash)
    if row is None:
        raise UnknownCallback()
    store.streams.lock_answers(row.tenant_id, row.run_id)
    for _ in range(_APPEND_TRIES):
        try:
            state = load_run_for_pass(store, row.tenant_id, row.run_id, tail=True).state
        except RunNotFound:
            raise CallbackNotWaiting() from None
        # Read after the stream: see the module's docstring.
        row = store.callbacks.get(token_hash) or row
        refuse_unless_open(row, now)
        check(row)
        awaited = _awaited(state, row)
        if awaited is None:
            raise CallbackNotWaiting()
        open_ = state.suspension
        step_index = open_.step_index if awaited and open_ is not None else row.step_index
        # An answer the run does not wait for names no suspension (0): a reader that
        # knows no run_due (the release before) must not take it for the open wait.
        version = state.suspension_version if awaited else 0
        appended = Appended(row, version, step_index, awaited)
        if store.streams.append(
            row.tenant_id, row.run_id, RUN_STREAM, state.version, [fact(appended)], now
        ):
            return appended
    raise TransientStoreError(
        f"callback of run {row.run_id}: other writers took the run's next version on every"
        f" try ({_APPEND_TRIES}); nothing was recorded"
    )
