"""Run and dispatch streams in `wf_events`, and the projections' checkpoints."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from ..errors import StoreError
from ..fast_init import fast_init
from ..lazy import lazy
from ..stream import (
    CALLBACK_COMPLETED,
    CALLBACK_FAILED,
    RUN_STREAM,
    STEP_EVENT_MATCHED,
    Fact,
    RecordedFact,
    decode,
    type_of,
)
from .inbox import InboxEvent
from .results import StoredResults, result_rows, stored_results
from .sql import Sql, rows_by_run, runs_params


@fast_init
@dataclass(frozen=True)
class StoredEvent:
    """One event of a stream as stored; `fact` is its typed form."""

    position: int
    tenant_id: str
    stream_id: str
    stream_type: str
    version: int
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any]
    recorded_at: datetime
    xid: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> StoredEvent:
        payload = row["payload"]  # None: a read that left it out (read_after)
        return cls(
            position=row["position"],
            tenant_id=row["tenant_id"],
            stream_id=row["stream_id"],
            stream_type=row["stream_type"],
            version=row["version"],
            type=row["type"],
            payload={} if payload is None else payload,
            metadata=row.get("metadata") or {},
            recorded_at=row["recorded_at"],
            xid=row.get("xid", ""),
        )

    @lazy
    def fact(self) -> Fact:
        return decode(self.type, self.payload)

    @property
    def recorded(self) -> RecordedFact:
        return RecordedFact(self.version, self.recorded_at, self.fact)


@fast_init
@dataclass(frozen=True)
class NewEvent:
    """An event to append in its stored form (the engine appends typed facts)."""

    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any] | None = None


@fast_init
@dataclass(frozen=True)
class RunSummaryWrite:
    """The run summary a pass records with its events (see RunStore.upsert)."""

    tenant_id: str
    run_id: str
    workflow_name: str
    status: str
    definition_fingerprint: str
    trigger_event_type: str
    workflow_version: int | None = None


@fast_init
@dataclass(frozen=True)
class RunEnd:
    """How a pass (or a cancel, a failure without a pass) ended its run, for the joins
    that wait for it as a child and those it opened as a parent."""

    status: str
    result: Any = None
    reason: str | None = None


@fast_init
@dataclass(frozen=True)
class PassWrite:
    """What one pass writes to its run (StreamStore.record_passes): `events` after
    `version` (which the pass holds: nothing is read back), `results` (values, awaited
    references; None: none recorded) as of the last event's version, the run summary
    (None: left as it is), if the pass ended the run, how (`ended`), and the awaited
    events the pass took (`consumed`: run_consumed_events)."""

    tenant_id: str
    run_id: str
    version: int
    events: Sequence[Fact | NewEvent] = ()
    summary: RunSummaryWrite | None = None
    results: tuple[Mapping[str, Any], Mapping[str, str | None]] | None = None
    ended: RunEnd | None = None
    consumed: Sequence[str] = ()


def _uuid_spelling(value: str) -> str:
    """A uuid as PostgreSQL prints it (anything else as given: the database refuses it)."""
    if (
        len(value) == 36
        and value[8] == value[13] == value[18] == value[23] == "-"
        and value.count("-") == 4
        and value.islower()
    ):
        return value  # already lowercase with its hyphens where PostgreSQL puts them
    try:
        return str(UUID(value))
    except ValueError:
        return value


def _as_new(event: Fact | NewEvent) -> NewEvent:
    if isinstance(event, NewEvent):
        return event
    return NewEvent(type_of(event), event.to_payload())


class StreamStore:
    """Appends with optimistic concurrency, and reads of whole streams or in commit order."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def append(
        self,
        tenant_id: str,
        stream_id: str,
        stream_type: str,
        expected_version: int,
        events: Sequence[Fact | NewEvent],
        recorded_at: datetime,
        check: bool = True,
    ) -> bool:
        """Append events after `expected_version`; False when that version is taken.

        Only the first event can conflict: a concurrent writer that took it blocks us
        on the unique index until it commits, then ON CONFLICT reports the loss. Later
        events are safe because no other writer can see our uncommitted first one.
        `check=False` sends without reading the result (for pipelines): only for an
        append after a version this transaction already holds.
        """
        for offset, item in enumerate(events):
            event = _as_new(item)
            params = {
                "tenant_id": tenant_id,
                "stream_id": stream_id,
                "stream_type": stream_type,
                "version": expected_version + offset + 1,
                "type": event.type,
                "payload": Jsonb(event.payload),
                "metadata": Jsonb(event.metadata or {}),
                "recorded_at": recorded_at,
            }
            if not check:
                self._sql.run("append_event", params)
                continue
            if self._sql.one("append_event", params) is None:
                if offset == 0:
                    return False
                raise StoreError(
                    f"stream {stream_id} changed under an append that held its version"
                )
        return True

    def append_to_many(
        self,
        tenant_id: str,
        stream_type: str,
        appends: Sequence[tuple[str, int, Fact]],
        recorded_at: datetime,
    ) -> set[str]:
        """Append one event of one type to each of many streams, (stream_id,
        expected_version, fact) each, in one statement; returns the streams that got it
        (for the others the version was taken: another writer won).

        Call with the streams in a stable order (e.g. sorted): two such statements over
        overlapping streams then wait for each other in the same order, never in a cycle.
        """
        if not appends:
            return set()
        types = {type_of(fact) for _, _, fact in appends}
        if len(types) != 1:
            raise StoreError("append_to_many appends events of one type")
        rows = self._sql.all(
            "append_to_many",
            {
                "tenant_id": tenant_id,
                "stream_type": stream_type,
                "type": types.pop(),
                "appends": Jsonb(
                    [
                        {"stream_id": stream, "version": version + 1, "payload": fact.to_payload()}
                        for stream, version, fact in appends
                    ]
                ),
                "recorded_at": recorded_at,
            },
        )
        return {r["stream_id"] for r in rows}

    def append_to_runs(
        self, appends: Sequence[tuple[str, str, int, Fact]], recorded_at: datetime
    ) -> set[tuple[str, str]]:
        """Append one event of one type to each of many run streams of any tenants,
        (tenant, run, expected_version, fact) each: one statement per tenant, runs in
        (tenant, run) order (see append_to_many). Returns the (tenant, run), spelled as
        given, that got theirs; each run at most once in `appends`."""
        by_tenant: dict[str, list[tuple[str, int, Fact]]] = {}
        for tenant_id, run_id, version, fact in sorted(appends, key=lambda a: (a[0], a[1])):
            by_tenant.setdefault(tenant_id, []).append((run_id, version, fact))
        won: set[tuple[str, str]] = set()
        for tenant_id, runs in by_tenant.items():
            # The database answers with run ids in its own spelling of a uuid.
            asked = {_uuid_spelling(run_id): run_id for run_id, _, _ in runs}
            for run_id in self.append_to_many(tenant_id, RUN_STREAM, runs, recorded_at):
                won.add((tenant_id, asked[run_id]))
        return won

    def record_passes(
        self, writes: Sequence[PassWrite], recorded_at: datetime
    ) -> Callable[[], list[tuple[str, str, str]]]:
        """The writes of one or more passes (each run at most once) in one statement,
        sent without waiting: inside a pipeline it costs no round trip of its own. Call
        the returned function after the pipeline: it returns the joins the ended runs
        closed as parents, (tenant, run, join id) each (see run_ended)."""
        events: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        runs: list[dict[str, Any]] = []
        ended: list[dict[str, Any]] = []
        consumed: list[dict[str, Any]] = []
        for write in writes:
            keys = {"tenant_id": write.tenant_id, "run_id": write.run_id}
            consumed += [{**keys, "event_id": event_id} for event_id in write.consumed]
            last = write.version + len(write.events)
            for n, item in enumerate(write.events):
                event = _as_new(item)
                events.append(
                    {
                        **keys,
                        "version": write.version + n + 1,
                        "type": event.type,
                        "payload": event.payload,
                        "metadata": event.metadata or {},
                    }
                )
            if write.results is not None:
                results += [{**keys, **r, "version": last} for r in result_rows(*write.results)]
            if (summary := write.summary) is not None:
                runs.append(
                    {
                        **keys,
                        "workflow_name": summary.workflow_name,
                        "status": summary.status,
                        "version": last,
                        "definition_fingerprint": summary.definition_fingerprint,
                        "trigger_event_type": summary.trigger_event_type,
                        "workflow_version": summary.workflow_version,
                    }
                )
            if (end := write.ended) is not None:
                ended.append(
                    {
                        **keys,
                        "status": end.status,
                        "result": {"v": end.result},
                        "reason": end.reason,
                    }
                )
        rows = self._sql.send(
            "record_pass",
            {
                "stream_type": RUN_STREAM,
                "events": Jsonb(events),
                "results": Jsonb(results),
                "runs": Jsonb(runs),
                "ended": Jsonb(ended),
                "consumed": Jsonb(consumed),
                "now": recorded_at,
            },
        )

        def closed_joins() -> list[tuple[str, str, str]]:
            return [(r["tenant_id"], r["run_id"], r["join_id"]) for r in rows()]

        return closed_joins

    def lock_answers(self, tenant_id: str, run_id: str) -> None:
        """Wait for the task outcomes and callback answers of this run that other
        transactions are recording, and keep the next ones waiting until this
        transaction ends (call first in the transaction, holding nothing else)."""
        self._sql.run("lock_run_answers", {"tenant_id": tenant_id, "run_id": run_id})

    def load(self, tenant_id: str, stream_id: str) -> list[StoredEvent]:
        """Every event of a stream, oldest first (empty when it does not exist)."""
        rows = self._sql.all("load_stream", {"tenant_id": tenant_id, "stream_id": stream_id})
        return [StoredEvent.from_row(r) for r in rows]

    def load_run(
        self, tenant_id: str, run_id: str, tail: bool = False
    ) -> tuple[list[StoredEvent], InboxEvent | None]:
        """A run's events and its trigger event's inbox row (None when not stored), in
        one round trip. `tail`: only the first event and those from the last pass's
        outcome on (what a resume needs; see load_run_tail)."""
        if tail:
            # On its generic plan (index probes by run, whatever the values): left to
            # the server, a read of one run is planned anew on every call (0.3-0.9 ms of
            # a task attempt's outcome, longer than the read). A resume batch's read of
            # several is left to it: forced generic there, the event-wait burst ran no
            # faster.
            [rows] = self._sql.batch_generic(
                [("load_run_tail", runs_params([(tenant_id, run_id)]))]
            )
        else:
            rows = self._sql.all("load_run_stream", {"tenant_id": tenant_id, "stream_id": run_id})
        return _run_from_rows(tenant_id, rows)

    def load_for_resume(self, runs: Sequence[tuple[str, str]]) -> list[RunForResume]:
        """What resuming each (tenant, run) needs: its stream's tail, trigger row,
        current results and the inbox rows its tail's matches name; for a whole batch of
        runs in one statement."""
        rows = self._sql.all("load_run_tail", runs_params(runs))
        return [
            RunForResume(
                *_run_from_rows(tenant_id, events),
                stored_results(_results_of(events)),
                _matched_rows(tenant_id, events),
            )
            for (tenant_id, _), events in zip(runs, rows_by_run(rows, len(runs)), strict=True)
        ]

    def read_after(
        self,
        after_xid: str,
        after_position: int,
        limit: int,
        horizon: str,
        payload_types: Collection[str],
    ) -> list[StoredEvent]:
        """Events after a checkpoint in commit order, below a horizon taken earlier in the
        transaction (CheckpointStore.horizon; see read_events_after in queries.sql).

        Only events whose type is in `payload_types` are read whole; the others come
        with an empty payload and metadata (their type, stream and position are all
        their reader uses), so their `fact` must not be asked for."""
        rows = self._sql.all(
            "read_events_after",
            {
                "after_xid": after_xid,
                "after_position": after_position,
                "limit": limit,
                "horizon": horizon,
                "payload_types": list(payload_types),
            },
        )
        return [StoredEvent.from_row(r) for r in rows]

    def dispatch_events_of_run(self, tenant_id: str, run_id: str) -> list[StoredEvent]:
        """Every event of a run's fire-and-forget delivery streams, in time order."""
        rows = self._sql.all("run_dispatch_events", {"tenant_id": tenant_id, "run_id": run_id})
        return [StoredEvent.from_row(r) for r in rows]


# The facts that match an open wait with an inbox row (an awaited event, a callback's
# answer): load_run_tail reads the row each names (its payload's `eventId`) with it.
MATCH_TYPES = frozenset({STEP_EVENT_MATCHED, CALLBACK_COMPLETED, CALLBACK_FAILED})


@dataclass(frozen=True)
class RunForResume:
    """One run as load_for_resume reads it. `matched`: the inbox rows the matches in
    its tail name, by event id (None for one not stored)."""

    events: list[StoredEvent]
    trigger: InboxEvent | None
    results: StoredResults
    matched: dict[str, InboxEvent | None]


def _results_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run_results rows load_run_tail carries on a run's first event (none without
    a stream)."""
    return (rows[0]["results"] or []) if rows else []


def _run_from_rows(
    tenant_id: str, rows: list[dict[str, Any]]
) -> tuple[list[StoredEvent], InboxEvent | None]:
    trigger = _inbox_row(tenant_id, rows[0]) if rows else None
    return [StoredEvent.from_row(r) for r in rows], trigger


def _matched_rows(tenant_id: str, rows: list[dict[str, Any]]) -> dict[str, InboxEvent | None]:
    """The inbox rows load_run_tail joined to the matches among `rows`, by event id."""
    return {
        r["payload"]["eventId"]: _inbox_row(tenant_id, r) for r in rows if r["type"] in MATCH_TYPES
    }


def _inbox_row(tenant_id: str, row: dict[str, Any]) -> InboxEvent | None:
    """The inbox row a stream read joined to an event (the `trigger_` columns), if any."""
    if row["trigger_event_id"] is None:
        return None
    return InboxEvent.from_row(row, "trigger_", tenant_id)
