"""A small in-memory reference interpreter of the workflow semantics, written from
ARCHITECTURE.md and kumiko-semantics.md (not from workflow_runner.interpreter), for the
differential property test.

A workflow is a spec of plain tuples:

    ("compute", key, value)          value: ("const", v) | ("item",) | ("awaited", key)
    ("branch", cond, on_true, on_false)   cond: ("const", bool) | ("has", key)
    ("for_each", items, body)        body sees the item as ("item",)
    ("wait", hours)
    ("wait_for_event", key, m, timeout_hours)   waits for "diff.ev" with detail m == m
    ("retry", times, fail_first, body)   body's first compute raises while attempt <= fail_first
    ("return",)                      returns every result so far

Awaited events are (hour offset, m, v). Time is exact here. An event that arrives at the
very instant a wait times out comes too late for it: the driver runs the schedules of
an instant (which resume the timed-out wait) before it delivers that instant's events,
as a due scan that ran first would in AWS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Spec = tuple[Any, ...]
Fact = tuple[Any, ...]


class _Suspend(Exception):
    def __init__(
        self,
        kind: str,
        path: list[dict[str, Any]],
        until: float,
        by: str | None = None,
        event: int | None = None,
    ) -> None:
        self.kind, self.path, self.until, self.by, self.event = kind, path, until, by, event


class _Return(Exception):
    pass


class _Fail(Exception):
    pass


@dataclass
class Reference:
    steps: list[Spec]
    events: list[tuple[float, int, int]]  # (hour, m, v), in arrival order
    results: dict[str, Any] = field(default_factory=dict)
    consumed: set[int] = field(default_factory=set)
    facts: list[Fact] = field(default_factory=list)
    now: float = 0.0

    def run(self) -> list[Fact]:
        """Run to the end; the facts: suspensions, resumes and the outcome."""
        resume: list[dict[str, Any]] | None = None
        pending: _Suspend | None = None
        for _ in range(1000):
            try:
                self._list(self.steps, [], resume, None)
                self.facts.append(("completed", self._snapshot()))
                return self.facts
            except _Return:
                self.facts.append(("completed", self._snapshot()))
                return self.facts
            except _Fail:
                self.facts.append(("failed",))
                return self.facts
            except _Suspend as s:
                pending = s
            self.facts.append(("suspend", pending.kind, pending.path))
            self.now = max(self.now, pending.until)
            self.facts.append(("resumed", pending.by))
            resume = pending.path
        raise AssertionError("reference did not finish")

    def _snapshot(self) -> dict[str, Any]:
        return dict(self.results)

    def _list(
        self,
        steps: list[Spec],
        prefix: list[dict[str, Any]],
        resume: list[dict[str, Any]] | None,
        item: Any,
    ) -> None:
        start = int(resume[0]["i"]) if resume else 0
        for i in range(start, len(steps)):
            self._step(steps[i], prefix, i, resume if (resume and i == start) else None, item)

    def _step(
        self,
        step: Spec,
        prefix: list[dict[str, Any]],
        i: int,
        resume: list[dict[str, Any]] | None,
        item: Any,
    ) -> None:
        kind = step[0]
        head = resume[0] if resume else None
        rest = resume[1:] if resume else None
        if kind == "compute":
            self.results[step[1]] = self._value(step[2], item)
        elif kind == "branch":
            if head is not None and "arm" in head:
                arm = head["arm"]
            else:
                cond = step[1]
                truth = cond[1] if cond[0] == "const" else self.results.get(cond[1]) is not None
                arm = "true" if truth else "false"
            body = step[2] if arm == "true" else step[3]
            self._list(body, [*prefix, {"i": i, "arm": arm}], rest or None, item)
        elif kind == "for_each":
            first = int(head.get("item", 0)) if head is not None else 0
            for k in range(first, len(step[1])):
                inner = rest if (head is not None and k == first) else None
                self._list(step[2], [*prefix, {"i": i, "item": k}], inner or None, step[1][k])
        elif kind == "wait":
            if resume is not None:
                return
            raise _Suspend("waiting", [*prefix, {"i": i}], self.now + step[1], "timer")
        elif kind == "wait_for_event":
            key, m, timeout = step[1], step[2], step[3]
            if resume is not None:
                return  # the payload was seeded when the suspension was resumed
            deadline = self.now + timeout
            for index, (hour, em, ev) in enumerate(self.events):
                if em == m and index not in self.consumed and hour < deadline:
                    # Stored since the run started (default lookback): the first one wins.
                    self.consumed.add(index)
                    self.results[key] = {"m": em, "v": ev}
                    raise _Suspend(
                        "waiting-for-event", [*prefix, {"i": i}], max(self.now, hour), "event"
                    )
            self.results[key] = None
            raise _Suspend("waiting-for-event", [*prefix, {"i": i}], deadline, "timeout")
        elif kind == "retry":
            attempt = int(head.get("attempt", 1)) if head is not None else 1
            times, fail_first, body = step[1], step[2], step[3]
            try:
                if attempt <= fail_first:
                    raise _Fail()
                self._list(body, [*prefix, {"i": i, "attempt": attempt}], rest or None, item)
            except _Fail:
                if attempt >= times:
                    raise
                raise _Suspend(
                    "retry-scheduled",
                    [*prefix, {"i": i, "attempt": attempt + 1}],
                    self.now + 1 / 60,
                    "timer",
                ) from None
        elif kind == "return":
            raise _Return()

    def _value(self, value: Spec, item: Any) -> Any:
        if value[0] == "const":
            return value[1]
        if value[0] == "item":
            return item
        awaited = self.results.get(value[1])
        return None if awaited is None else awaited["v"]
