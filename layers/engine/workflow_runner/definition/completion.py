"""Completion policies of map and parallel: when a step over many items ends early, and
the batch result it yields. Pure arithmetic, shared by every step that runs items at
once: the worker counting a map's children, the fold deciding whether a parallel's run
is due, and the resume building the batch result.

The rules (those of Step Functions' tolerated failures and of AWS durable functions'
completion config):

- a tolerance is exceeded when more items failed than it allows; exactly at the
  threshold is tolerated (`tolerated_failures=1`: one failure goes on, the second ends
  the step; `tolerated_failure_pct=25` over 8 items: two go on, the third ends it);
- `min_successful` is reached once that many items succeeded; it is out of reach once
  so many failed that the items left cannot make it up, which ends the step as a
  tolerance exceeded (it cannot succeed any more);
- when one count brings both, the tolerance wins; when every item settled and neither
  applies, the step ends `all_completed`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..errors import WorkflowDefinitionError

CompletionReason: TypeAlias = Literal[
    "all_completed", "min_successful_reached", "failure_tolerance_exceeded"
]
ALL_COMPLETED: CompletionReason = "all_completed"
MIN_SUCCESSFUL_REACHED: CompletionReason = "min_successful_reached"
FAILURE_TOLERANCE_EXCEEDED: CompletionReason = "failure_tolerance_exceeded"
COMPLETION_REASONS: tuple[CompletionReason, ...] = (
    ALL_COMPLETED,
    MIN_SUCCESSFUL_REACHED,
    FAILURE_TOLERANCE_EXCEEDED,
)
BATCH_KEYS = frozenset({"results", "failures", "succeeded", "failed", "completion"})


def _count(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


@dataclass(frozen=True)
class Completion:
    """When a map or a parallel ends, and what it yields: with a completion policy the
    step puts a batch result under its `result_key` instead of failing at the first
    failure: `{"results": [...], "failures": [...], "succeeded": n, "failed": n,
    "completion": "all_completed" | "min_successful_reached" |
    "failure_tolerance_exceeded"}`.

    Reaching `min_successful`, or exceeding a tolerance, ends the step at once: items not
    started never start, running ones are stopped. Exceeding a tolerance fails the run
    (`reason: "failure_tolerance_exceeded"`) unless the step has `catch=True`. Exactly at
    a threshold counts as tolerated. `Completion()` runs every item and never fails the
    step for its items' failures.

    Args:
        min_successful: end the step as soon as this many items succeeded (>= 1). Once
            it cannot be reached any more (too many failed), the step ends as a tolerance
            exceeded.
        tolerated_failures: how many items may fail (>= 0); one more ends the step.
        tolerated_failure_pct: what percentage of the items may fail (0 to 100); more
            ends the step.
    """

    min_successful: int | None = None
    tolerated_failures: int | None = None
    tolerated_failure_pct: float | None = None

    def __post_init__(self) -> None:
        if self.min_successful is not None and not _count(self.min_successful, 1):
            raise WorkflowDefinitionError(
                f"Completion: min_successful must be an integer >= 1, not {self.min_successful!r}"
            )
        if self.tolerated_failures is not None and not _count(self.tolerated_failures, 0):
            raise WorkflowDefinitionError(
                "Completion: tolerated_failures must be an integer >= 0, "
                f"not {self.tolerated_failures!r}"
            )
        pct = self.tolerated_failure_pct
        if pct is not None and (
            isinstance(pct, bool)
            or not isinstance(pct, (int, float))
            or not math.isfinite(pct)
            or not 0 <= pct <= 100
        ):
            raise WorkflowDefinitionError(
                f"Completion: tolerated_failure_pct must be a number from 0 to 100, not {pct!r}"
            )

    def to_json(self) -> dict[str, Any]:
        """The policy as stored with a map's join and a parallel's suspension."""
        stored: dict[str, Any] = {}
        if self.min_successful is not None:
            stored["minSuccessful"] = self.min_successful
        if self.tolerated_failures is not None:
            stored["toleratedFailures"] = self.tolerated_failures
        if self.tolerated_failure_pct is not None:
            stored["toleratedFailurePct"] = self.tolerated_failure_pct
        return stored

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Completion:
        return cls(
            min_successful=stored.get("minSuccessful"),
            tolerated_failures=stored.get("toleratedFailures"),
            tolerated_failure_pct=stored.get("toleratedFailurePct"),
        )

    def describe(self) -> str:
        """The policy in a few words (graph nodes, timelines)."""
        parts = []
        if self.min_successful is not None:
            parts.append(f"until {self.min_successful} succeed")
        if self.tolerated_failures is not None:
            parts.append(f"tolerate {self.tolerated_failures} failure(s)")
        if self.tolerated_failure_pct is not None:
            parts.append(f"tolerate {self.tolerated_failure_pct:g}% failed")
        return ", ".join(parts) or "all, as a batch"


def tolerance_exceeded(policy: Completion, total: int, failed: int) -> bool:
    """Whether `failed` of `total` items are more than the policy tolerates (the
    percentage compared without rounding: failed/total > pct/100)."""
    if policy.tolerated_failures is not None and failed > policy.tolerated_failures:
        return True
    pct = policy.tolerated_failure_pct
    if pct is not None and total > 0 and failed * 100 > pct * total:
        return True
    needed = policy.min_successful
    return needed is not None and total - failed < needed


def decide(policy: Completion, total: int, succeeded: int, failed: int) -> CompletionReason | None:
    """How a step of `total` items ends now that `succeeded` and `failed` of them
    settled; None while it goes on (see the module's rules)."""
    if tolerance_exceeded(policy, total, failed):
        return FAILURE_TOLERANCE_EXCEEDED
    if policy.min_successful is not None and succeeded >= policy.min_successful:
        return MIN_SUCCESSFUL_REACHED
    if succeeded + failed >= total:
        return ALL_COMPLETED
    return None


@dataclass(frozen=True)
class ItemOutcome:
    """One item of a batch as its step ended: `succeeded` (its `value`), `failed` (its
    `reason`, and `ref`: {"runId": ...} of a child or {"taskKey": ...} of a task), or
    `stopped` (it never started, or the step's end stopped it)."""

    status: Literal["succeeded", "failed", "stopped"]
    value: Any = None
    reason: str | None = None
    ref: Mapping[str, Any] = field(default_factory=dict)


def batch_result(items: Sequence[ItemOutcome], completion: CompletionReason) -> dict[str, Any]:
    """The batch result a step with a completion policy yields: every item's value in
    item order (None where it did not succeed), its failures, the counts and how the
    step ended."""
    failures = [
        {"index": index, "reason": item.reason, **item.ref}
        for index, item in enumerate(items)
        if item.status == "failed"
    ]
    succeeded = sum(1 for item in items if item.status == "succeeded")
    return {
        "results": [item.value if item.status == "succeeded" else None for item in items],
        "failures": failures,
        "succeeded": succeeded,
        "failed": len(failures),
        "completion": completion,
    }


def is_batch_result(value: object) -> bool:
    """Whether a stored result looks like a batch result (what the console draws)."""
    return (
        isinstance(value, Mapping)
        and set(value) >= BATCH_KEYS
        and value.get("completion") in COMPLETION_REASONS
    )
