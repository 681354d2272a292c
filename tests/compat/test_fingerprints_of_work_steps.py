"""Fingerprints of definitions with tasks, maps and parallels written before completion
policies and the newer RetryPolicy fields: unchanged, so their runs in flight stay
pinned to them after the upgrade (a definition's fingerprint is a storage contract)."""

from __future__ import annotations

from workflow_runner import Event, RetryPolicy, Steps, define_workflow, on_call, on_event
from workflow_runner.definition import WorkflowDefinition


def _before_completion_policies() -> WorkflowDefinition:
    return define_workflow(
        name="pinned-work",
        trigger=on_event("pinned.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.task("quote", lambda ctx: 1, retry=RetryPolicy(max_attempts=2, jitter="none")),
            s.parallel(
                s.task("a", lambda ctx: 1),
                s.task("b", lambda ctx: 2, retry=RetryPolicy(non_retryable=(KeyError,))),
                result_key="both",
            ),
            s.map(Event.payload["items"], workflow="kid", concurrency=3, result_key="all"),
            s.call_workflow("kid", input={"n": 1}, result_key="one", catch=True),
            s.return_({"all": Steps["all"]}),
        ],
        register=False,
    )


def _kid() -> WorkflowDefinition:
    return define_workflow(
        name="kid", trigger=on_call(), steps=lambda s: [s.return_({"ok": True})], register=False
    )


# Computed by the release before completion policies (main at 2afba8f).
RECORDED = {
    "pinned-work": "d0606a9eb4b6def495a5d403e36fb2208860d3abd79f9978b8d19add40d48d78",
    "kid": "88104b60058a7d1e8dc896500256fd4101f3af45b7e57a7e8240a6df4f005460",
}


def test_fingerprints_of_work_steps_are_unchanged() -> None:
    now = {d.name: d.fingerprint for d in (_before_completion_policies(), _kid())}
    assert now == RECORDED
