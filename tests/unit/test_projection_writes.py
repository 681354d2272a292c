"""The pending projection's deferred writes (engine/projection.py, _PendingWrites): a
batch's deletes, new rows and matches go out as one statement each, with the same
result as applying every event in order."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from workflow_runner.engine.projection import _PendingWrites
from workflow_runner.store import NewPendingRow, PendingMark

TENANT = "00000000-0000-4000-8000-00000000000a"
DUE = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class _Pending:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def delete_runs(self, runs: list[tuple[str, str]]) -> None:
        self.calls.append(("delete", [r for _, r in runs]))

    def upsert_many(self, rows: list[NewPendingRow]) -> None:
        self.calls.append(("rows", [(r.run_id, r.step_index, r.suspension_version) for r in rows]))

    def mark_matched_rows(self, marks: list[PendingMark]) -> None:
        self.calls.append(("marks", [(m.run_id, m.event_id) for m in marks]))


class _Store:
    def __init__(self) -> None:
        self.pending = _Pending()


def _row(run: str, version: int, step: int = 1) -> NewPendingRow:
    return NewPendingRow(
        tenant_id=TENANT,
        run_id=run,
        step_index=step,
        workflow_name="w",
        suspension_event_type="workflow.step.waiting",
        wake_at=DUE,
        retry_attempt=None,
        definition_fingerprint=None,
        wait_event_type=None,
        match_expr=None,
        suspension_version=version,
        lookback_from=None,
        match_key=None,
    )


def _mark(run: str, event_id: str, version: int = 3) -> PendingMark:
    return PendingMark(TENANT, run, version, "order.approved", event_id, DUE)


def _writes() -> tuple[_PendingWrites, _Pending]:
    store = _Store()
    return _PendingWrites(store), store.pending  # type: ignore[arg-type]


def test_a_batchs_new_rows_go_out_in_one_statement_at_the_flush() -> None:
    writes, pending = _writes()
    for run in ("r1", "r2", "r3"):
        writes.upsert(_row(run, 3))
    assert pending.calls == []
    writes.flush()
    assert pending.calls == [("rows", [("r1", 1, 3), ("r2", 1, 3), ("r3", 1, 3)])]
    writes.flush()
    assert len(pending.calls) == 1  # nothing left to send


def test_a_delete_after_a_row_drops_it() -> None:
    writes, pending = _writes()
    writes.upsert(_row("r1", 3))
    writes.upsert(_row("r2", 3))
    writes.delete(TENANT, "r1")  # the run resumed: its row goes
    writes.flush()
    assert pending.calls == [("delete", ["r1"]), ("rows", [("r2", 1, 3)])]


def test_a_row_after_a_delete_is_written_after_it() -> None:
    writes, pending = _writes()
    writes.delete(TENANT, "r1")
    writes.upsert(_row("r1", 7))  # suspended again
    writes.flush()
    assert pending.calls == [("delete", ["r1"]), ("rows", [("r1", 1, 7)])]


def test_the_later_suspension_of_a_step_wins_and_other_steps_stay() -> None:
    writes, pending = _writes()
    writes.upsert(_row("r1", 3))
    writes.upsert(_row("r1", 6))
    writes.upsert(_row("r1", 4, step=2))
    writes.upsert(_row("r1", 5))  # older than the kept one: as the statement's WHERE
    writes.flush()
    assert pending.calls == [("rows", [("r1", 1, 6), ("r1", 2, 4)])]


def test_another_write_of_a_run_with_deferred_writes_flushes_them_first() -> None:
    writes, pending = _writes()
    writes.upsert(_row("r1", 3))
    writes.before_write(TENANT, "r2")  # nothing deferred for r2
    assert pending.calls == []
    writes.before_write(TENANT, "r1")
    assert pending.calls == [("rows", [("r1", 1, 3)])]
    writes.delete(TENANT, "r2")
    writes.before_write(TENANT, "r2")
    assert pending.calls[-1] == ("delete", ["r2"])


def test_a_batchs_matches_go_out_in_one_statement_after_the_rows() -> None:
    writes, pending = _writes()
    writes.mark(_mark("r1", "e1"))
    writes.upsert(_row("r2", 3))
    writes.mark(_mark("r3", "e3"))
    writes.delete(TENANT, "r4")
    assert pending.calls == []
    writes.flush()
    assert pending.calls == [
        ("delete", ["r4"]),
        ("rows", [("r2", 1, 3)]),
        ("marks", [("r1", "e1"), ("r3", "e3")]),
    ]


def test_a_delete_after_a_match_drops_the_match() -> None:
    writes, pending = _writes()
    writes.mark(_mark("r1", "e1"))
    writes.delete(TENANT, "r1")  # resumed (or ended) after the match: its row goes
    writes.flush()
    assert pending.calls == [("delete", ["r1"])]


def test_a_match_after_the_runs_deferred_row_or_delete_goes_out_after_it() -> None:
    writes, pending = _writes()
    writes.upsert(_row("r1", 3))
    writes.mark(_mark("r1", "e1"))  # its row must exist first
    writes.delete(TENANT, "r2")
    writes.mark(_mark("r2", "e2"))  # flushes everything deferred, r1's match too
    writes.flush()
    assert pending.calls == [
        ("rows", [("r1", 1, 3)]),
        ("delete", ["r2"]),
        ("marks", [("r1", "e1")]),
        ("marks", [("r2", "e2")]),
    ]


def test_a_row_or_second_match_after_a_match_of_its_run_flushes_the_match_first() -> None:
    writes, pending = _writes()
    writes.mark(_mark("r1", "e1"))
    writes.upsert(_row("r1", 5))  # resumed and suspended again: after the match
    writes.mark(_mark("r2", "e2"))
    writes.mark(_mark("r2", "e3", version=4))  # one statement updates a row once
    writes.before_write(TENANT, "r2")  # a look-back or migration of r2
    writes.flush()
    assert pending.calls == [
        ("marks", [("r1", "e1")]),
        ("rows", [("r1", 1, 5)]),
        ("marks", [("r2", "e2")]),
        ("marks", [("r2", "e3")]),
    ]
