"""Finding runs the way an operator does: across tenants, by filters, by idempotency
key, and by a unique prefix of the run id (tables print short ids).

Used by `wfr` and the console; read-only.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..definition import WorkflowRegistry, run_id_for
from ..definition.registry import unknown_workflow_message
from ..durations import format_instant, parse_instant
from ..errors import InvalidInput, RunNotFound, WorkflowRunnerError
from ..store import RunKey, RunQuery, RunSummary, Store
from ..stream import RUN_STATUSES, RunStatus

MIN_PREFIX = 4
MAX_CANDIDATES = 10
_HEX = re.compile(r"^[0-9a-f]+$")


class AmbiguousRunId(InvalidInput):
    """A run id prefix matches more than one run; `candidates` lists some of them."""

    def __init__(self, ref: str, candidates: Sequence[RunSummary]) -> None:
        shown = candidates[:MAX_CANDIDATES]
        lines = [
            f"  {r.run_id}  tenant {r.tenant_id}  {r.workflow_name}  {r.status}" for r in shown
        ]
        more = " (and more)" if len(candidates) > MAX_CANDIDATES else ""
        super().__init__(
            f"run id {ref!r} is ambiguous: it matches {len(shown)} runs{more}; give more "
            "characters (or --tenant):\n" + "\n".join(lines)
        )
        self.candidates = list(shown)


class NoSuchRun(RunNotFound):
    """No run id starts with the prefix given (in the tenant, when one was given)."""

    def __init__(self, ref: str, tenant_id: str | None) -> None:
        where = f"for tenant {tenant_id}" if tenant_id else "in any tenant"
        WorkflowRunnerError.__init__(self, f"run {ref} not found {where}")
        self.tenant_id = tenant_id or ""
        self.run_id = ref


def _id_range(ref: str) -> tuple[str, str] | None:
    """[low, high] of the run ids a full id or a prefix names (None: not an id)."""
    digits = ref.strip().lower().replace("-", "")
    if not _HEX.match(digits) or len(digits) > 32:
        return None
    if len(digits) == 32:
        exact = str(uuid.UUID(digits))
        return exact, exact
    if len(digits) < MIN_PREFIX:
        return None
    low = str(uuid.UUID(digits.ljust(32, "0")))
    high = str(uuid.UUID(digits.ljust(32, "f")))
    return low, high


def resolve_run(store: Store, ref: str, tenant_id: str | None = None) -> RunSummary:
    """The run a full run id or a unique prefix of it (at least 4 hex digits) names.

    Without `tenant_id` every tenant is searched: a run id that exists in two tenants
    is ambiguous then, and the error lists both with their tenants.

    Raises:
        InvalidInput: `ref` is neither a UUID nor a prefix of at least 4 hex digits.
        RunNotFound: no such run (in that tenant).
        AmbiguousRunId: the prefix matches several runs.
    """
    bounds = _id_range(ref)
    if bounds is None:
        raise InvalidInput(
            f"run id must be a UUID or at least its first {MIN_PREFIX} hex digits, got {ref!r}"
        )
    low, high = bounds
    if low == high and tenant_id is not None:
        run = store.runs.get(tenant_id, low)
        if run is None:
            raise RunNotFound(tenant_id, low)
        return run
    found = store.console.runs_in_id_range(low, high, tenant_id, MAX_CANDIDATES + 1)
    if not found:
        raise NoSuchRun(low if low == high else ref, tenant_id)
    if len(found) > 1:
        raise AmbiguousRunId(ref, found)
    return found[0]


@dataclass(frozen=True)
class RunFilter:
    """What to list; None means "any". `key` is an idempotency key (the run ids it
    stands for are derived from it); `since`/`until` bound the last change."""

    status: RunStatus | None = None
    workflow: str | None = None
    workflow_version: int | None = None
    tenant_id: str | None = None
    key: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class RunPage:
    """One page of runs, newest change first; `next_cursor` continues after it."""

    runs: list[RunSummary]
    next_cursor: str | None


def encode_cursor(run: RunSummary) -> str:
    """The cursor of the page after `run` (opaque to callers, safe in a URL)."""
    return f"{format_instant(run.updated_at)}~{run.tenant_id}~{run.run_id}"


def decode_cursor(cursor: str) -> RunKey:
    """Raises: InvalidInput: not a cursor this module made."""
    try:
        at, tenant, run = cursor.split("~")
        return RunKey(parse_instant(at), str(uuid.UUID(tenant)), str(uuid.UUID(run)))
    except (ValueError, InvalidInput):
        raise InvalidInput(f"not a page cursor: {cursor!r}") from None


def workflow_names(store: Store, registry: WorkflowRegistry) -> list[str]:
    """Every workflow an operator may filter by: registered, or with runs stored."""
    return sorted(set(registry.names()) | set(store.console.workflow_names()))


def check_workflow(name: str, known: Sequence[str], where: str = "registered or has runs") -> None:
    """Raises InvalidInput, with the closest of the `known` names, unless `name` is one.

    `where` says what makes a name known (the message reads "no workflow named X is <where>").
    """
    if name not in known:
        raise InvalidInput(unknown_workflow_message(name, known, where))


def version_fingerprints(registry: WorkflowRegistry, name: str, version: int) -> list[str]:
    """The fingerprints of `name` at `version` among the registered definitions."""
    return [d.fingerprint for d in registry if d.name == name and d.version == version]


def workflow_version_of(run: RunSummary, registry: WorkflowRegistry) -> int | None:
    """The workflow version of a run: recorded, else that of its registered fingerprint."""
    if run.workflow_version is not None:
        return run.workflow_version
    definition = registry.find(run.workflow_name, run.definition_fingerprint)
    return definition.version if definition else None


def list_runs(
    store: Store,
    registry: WorkflowRegistry,
    flt: RunFilter,
    cursor: str | None = None,
    limit: int = 50,
) -> RunPage:
    """One page of runs across tenants (or of one), newest change first.

    Keyset-paginated: pass the returned `next_cursor` for the following page; the cost
    of a page does not grow with its depth.

    Raises:
        InvalidInput: an unknown workflow (with close names), a bad cursor or limit.
    """
    if limit < 1:
        raise InvalidInput("the page size must be at least 1")
    if flt.workflow_version is not None and flt.workflow is None:
        raise InvalidInput("a workflow version filter needs the workflow's name too")
    names: Sequence[str] = ()
    if flt.workflow is not None or flt.key is not None:
        names = workflow_names(store, registry)
    if flt.workflow is not None:
        check_workflow(flt.workflow, names)
    run_ids = None
    if flt.key is not None:
        candidates = [flt.workflow] if flt.workflow else names
        run_ids = [run_id_for(name, flt.key) for name in candidates]
    fingerprints: list[str] = []
    if flt.workflow is not None and flt.workflow_version is not None:
        fingerprints = version_fingerprints(registry, flt.workflow, flt.workflow_version)
    query = RunQuery(
        statuses=[flt.status] if flt.status else list(RUN_STATUSES),
        workflow_name=flt.workflow,
        workflow_version=flt.workflow_version,
        fingerprints=fingerprints,
        tenant_id=flt.tenant_id,
        run_ids=run_ids,
        since=flt.since,
        until=flt.until,
    )
    after = decode_cursor(cursor) if cursor else None
    rows = store.console.runs(query, after, limit + 1)
    page = rows[:limit]
    return RunPage(page, encode_cursor(page[-1]) if len(rows) > limit else None)
