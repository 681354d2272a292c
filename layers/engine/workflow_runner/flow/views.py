"""What operators read about flow control (`wfr runs show`, `wfr limits`, the console):
what holds a run back, and each limit key with its work in flight and queued."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..store import Store
from ..stream import NEVER, FlowHeld, RunState
from .store import LimitRow


@dataclass(frozen=True)
class LimitWait:
    """One thing a limit holds back of a run: the run itself ("run") or a task ("task
    <key>"), the limit (as operators read it), since when and until when (None: until a
    slot frees), and how much work of the key is ahead of it."""

    what: str
    limit: str
    since: datetime | None
    until: datetime | None
    ahead: int | None = None

    def describe(self) -> str:
        when = f"until {self.until.isoformat()}" if self.until else "until a slot frees"
        ahead = f", {self.ahead} ahead" if self.ahead else ""
        return f"{self.what} waits for {self.limit} {when}{ahead}"


def describe_key(flow_key: str, row: LimitRow | None = None) -> str:
    """A limit key as operators read it: `concurrency 2 of per-account key 'a-1' (per
    tenant)`; from the key's row when known, else from the key's name."""
    kind, scope, _, owner, value = [*flow_key.split(":", 4), "", "", "", "", ""][:5]
    if row is not None:
        owner = f"{row.workflow_name}/{row.step_key}" if row.step_key else row.workflow_name
        value = row.key_value
        kind = f"{row.kind} {rate(row)}"
    shared = {"tenant": "per tenant", "workflow": "all tenants", "global": "global"}
    where = f" of {owner}" if owner and owner != "*" else ""
    key = f" key {value!r}" if value else ""
    return f"{kind}{where}{key} ({shared.get(scope, scope)})"


def rate(row: LimitRow) -> str:
    """A key's numbers: `2` at once, `10 per 0:01:00` (burst 3)."""
    if row.kind in ("throttle", "rate_limit"):
        burst = f" (burst {row.burst})" if row.kind == "throttle" and row.burst > 1 else ""
        return f"{row.limit} per {timedelta(milliseconds=row.period_ms)}{burst}"
    return str(row.limit)


def turns_ahead(row: LimitRow, now: datetime) -> int:
    """A throttle's work waiting for its turn: the turns reserved beyond now (an
    estimate: a held run that was cancelled still holds its turn)."""
    if row.kind != "throttle" or row.next_turn is None or row.limit < 1:
        return 0
    interval = timedelta(milliseconds=row.period_ms) / row.limit
    if interval <= timedelta(0):
        return 0
    return max(0, math.ceil((row.next_turn - now) / interval) - row.burst)


def limit_waits(store: Store, state: RunState, now: datetime) -> list[LimitWait]:
    """What flow control holds back of a run now (empty: nothing)."""
    found: list[LimitWait] = []
    held = state.suspension
    # A run held at its start for a slot is queued as its resume (below).
    if isinstance(held, FlowHeld) and held.wake_at > now and held.reason != "concurrency":
        until = None if held.wake_at >= NEVER else held.wake_at
        found.append(LimitWait("run", f"{held.reason}: {held.limit}", state.started_at, until))
    limits = {row.flow_key: row for row in store.flow.limits(now, tenant_id=state.tenant_id)}
    for wait in store.flow.run_waits(state.tenant_id, state.run_id):
        what = "run" if wait.work == "pass" else f"task at step {wait.step_index}"
        found.append(
            LimitWait(
                what,
                describe_key(wait.flow_key, limits.get(wait.flow_key)),
                wait.queued_at,
                None,
                wait.ahead,
            )
        )
    for task_key, turn in store.flow.run_turns(state.tenant_id, state.run_id, now):
        found.append(LimitWait(f"task {task_key}", "its throttle turn", None, turn))
    return found
