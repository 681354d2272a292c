"""Retry defaults a user expects, documented in one table (docs/_drafts/local-loop.md):
no jitter unless asked for, for tasks as for `s.retry`, so `base="PT2S"` means a first
retry after two seconds. Fingerprints of definitions written before the default changed
stay what they were, so no waiting run fails on the upgrade."""

from __future__ import annotations

from typing import Any

from workflow_runner import RetryPolicy, define_workflow, on_event


def _charge(ctx: Any) -> dict[str, str]:
    return {"status": "paid"}


def _pinned() -> list[Any]:
    """Definitions whose fingerprints were recorded before the jitter default changed: do
    not edit a line of their steps, the fingerprints below are of this source."""
    return [
        define_workflow(
            name="pinned-default-policy",
            trigger=on_event("pinned.a"),
            register=False,
            steps=lambda s: [s.task("charge", _charge), s.return_({"isSuccess": True})],
        ),
        define_workflow(
            name="pinned-own-policy",
            trigger=on_event("pinned.b"),
            register=False,
            steps=lambda s: [
                s.task("charge", _charge, retry=RetryPolicy(max_attempts=5, base="PT2S")),
                s.mail_send(
                    to="ops@example.com",
                    subject="charged",
                    body="b",
                    result_key="sent",
                    retry=RetryPolicy(max_attempts=2),
                ),
            ],
        ),
    ]


def test_task_retries_have_no_jitter_unless_asked_for_like_retry_steps() -> None:
    policy = RetryPolicy(base="PT2S")
    assert policy.jitter == "none"
    assert [policy.delay(n, lambda: 0.18) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert RetryPolicy(base="PT2S", jitter="full").delay(1, lambda: 0.18) == 0.36
    assert policy.to_json()["jitter"] == "none"  # what a delivery request stores


def test_fingerprints_of_definitions_that_left_jitter_unset_do_not_move() -> None:
    assert {d.name: d.fingerprint for d in _pinned()} == {
        "pinned-default-policy": "cdbce205735822d1d27cdc36cf2adc90a61fe5328db4dcc7f44a12c79e545922",
        "pinned-own-policy": "527f77c3ded01265597e83c352ed6534da285b1ea363bf407ab1e7d87cfc9d24",
    }


def test_a_policy_can_still_be_copied_with_dataclasses_replace() -> None:
    # As before jitter_given existed: replace() passes every init field to __init__,
    # so the bookkeeping fields must not be init fields.
    import dataclasses

    policy = dataclasses.replace(RetryPolicy(base="PT2S"), max_attempts=5, base="2s")
    assert (policy.max_attempts, policy.base, policy.jitter) == (5, "PT2S", "none")
    assert policy.problems == ()
