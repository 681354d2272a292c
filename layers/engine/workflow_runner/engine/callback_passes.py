"""What a pass reads and writes for callbacks.

It reads the created callbacks earlier passes made (`known_callbacks`, for
`ctx.callbacks` and await_callback). Beside its outcome it writes a CallbackCreated fact
per callback it created (before the outcome, which stays the stream's last event), the
tokens it handed out as `callbacks` rows (a wait_for_callback's, the created ones'), and
the closure of created callbacks it stopped listening to: an await that found one
expired, or that resumed without its answer (a timer ran out, an operator resumed it).
A closure is what makes an answer that comes later lose (it is refused as not_waiting),
whatever its clock says.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..pass_result import CreatedCallback, KnownCallback, PassResult
from ..store import NewCallback, Store
from ..stream import CallbackCreated, StepWaitingForCallback, SuspensionFact

# Why a created callback closed when the same pass made its name again.
SUPERSEDED = "superseded"
# Why a created callback closed when an operator resumed its await without its answer.
MOVED_ON = "moved_on"


def known_callbacks(store: Store, tenant_id: str, run_id: str) -> list[KnownCallback]:
    """The run's created callbacks as a pass finds them (the newest of each name)."""
    found = []
    for created in store.callbacks.created_of_run(tenant_id, run_id):
        row = created.row
        assert row.name is not None
        found.append(
            KnownCallback(
                name=row.name,
                token_hash=row.token_hash,
                mint=row.mint,
                timeout_at=row.expires_at,
                heartbeat_seconds=row.heartbeat_seconds,
                last_beat=row.last_heartbeat_at or row.created_at,
                event_id=row.completion_event_id,
                error=row.failed_error,
                answer=created.answer,
                answer_erased=created.answer_erased,
                closed=row.closed_at is not None,
            )
        )
    return found


def close_unanswered_await(
    store: Store, tenant_id: str, suspension: SuspensionFact, answered: bool, now: datetime
) -> None:
    """A resume of an await_callback without its answer (`answered` False) closes the
    created callback: its timer ran out, or an operator moved the run on."""
    if isinstance(suspension, StepWaitingForCallback) and suspension.name and not answered:
        reason = suspension.timer if now >= suspension.due_at else MOVED_ON
        store.callbacks.close(tenant_id, suspension.token_hash, reason, now)


@dataclass(frozen=True)
class CallbackWrites:
    """A pass's callback writes (`facts`: to append before its outcome)."""

    tenant_id: str
    run_id: str
    workflow_name: str
    made: list[CreatedCallback]
    closed: list[tuple[str, str]]

    @property
    def facts(self) -> list[CallbackCreated]:
        return [
            CallbackCreated(
                step_index=int(made.path[0]["i"]),
                path=made.path,
                name=made.name,
                token_hash=made.token_hash,
                timeout_at=made.timeout_at,
                heartbeat_seconds=made.heartbeat_seconds,
            )
            for made in self.made
        ]

    def write(
        self,
        store: Store,
        outcome: StepWaitingForCallback | None,
        outcome_version: int,
        now: datetime,
    ) -> None:
        """Insert the rows (the pass's outcome lands at `outcome_version`; `outcome`: its
        suspension when that is a callback wait) and close what an await found expired."""

        def new_row(
            token_hash: str,
            step_index: int,
            path: list[dict[str, object]],
            expires_at: datetime,
            heartbeat_seconds: int | None,
            **created: str | None,
        ) -> NewCallback:
            return NewCallback(
                tenant_id=self.tenant_id,
                token_hash=token_hash,
                run_id=self.run_id,
                workflow_name=self.workflow_name,
                suspension_version=outcome_version,
                step_index=step_index,
                path=path,
                expires_at=expires_at,
                heartbeat_seconds=heartbeat_seconds,
                **created,
            )

        rows = [
            new_row(
                made.token_hash,
                int(made.path[0]["i"]),
                made.path,
                made.timeout_at,
                made.heartbeat_seconds,
                name=made.name,
                mint=made.mint,
                closed_reason=SUPERSEDED if made.superseded else None,
            )
            for made in self.made
        ]
        if outcome is not None and outcome.name is None:  # an await's row is its create's
            rows.append(
                new_row(
                    outcome.token_hash,
                    outcome.step_index,
                    outcome.path,
                    outcome.timeout_at,
                    outcome.heartbeat_seconds,
                )
            )
        for row in rows:
            store.callbacks.insert(row, now)
        for token_hash, timer in self.closed:
            store.callbacks.close(self.tenant_id, token_hash, timer, now)


def callback_writes(
    result: PassResult, tenant_id: str, run_id: str, workflow_name: str
) -> CallbackWrites:
    """The callback writes of a pass. A pass that fails records no created callback: a
    redrive repeats it with the same seed, minting the same tokens again."""
    made = result.created_callbacks if result.outcome != "failed" else []
    return CallbackWrites(tenant_id, run_id, workflow_name, list(made), result.closed_callbacks)
