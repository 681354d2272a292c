"""RetryPolicy: its defaults, the allow-list `retry_on`, the exponential `rate`, and
`at_most_once` (definition/retry.py)."""

from __future__ import annotations

from typing import Any

import pytest
from workflow_runner import RetryPolicy, TaskInterrupted, WorkflowDefinitionError


def test_the_defaults_are_those_the_docs_table_lists() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.backoff, policy.base, policy.cap, policy.jitter) == (
        3,
        "exponential",
        "PT1S",
        "PT5M",
        "none",
    )
    assert (policy.non_retryable, policy.retry_on, policy.rate, policy.at_most_once) == (
        (),
        None,
        2.0,
        False,
    )


def test_without_retry_on_every_error_but_the_non_retryable_is_retried() -> None:
    policy = RetryPolicy(non_retryable=(ValueError,))
    assert policy.retries(RuntimeError("down"))
    assert not policy.retries(ValueError("declined"))
    assert not policy.retries(UnicodeError("a ValueError too"))


def test_retry_on_retries_only_the_listed_errors_and_their_subclasses() -> None:
    policy = RetryPolicy(retry_on=(ConnectionError,))
    assert policy.retries(ConnectionResetError("reset"))
    assert not policy.retries(RuntimeError("a bug"))
    assert not policy.retries(TaskInterrupted("the worker died"))


def test_non_retryable_wins_where_both_name_an_error() -> None:
    policy = RetryPolicy(retry_on=(OSError,), non_retryable=(PermissionError,))
    assert policy.retries(TimeoutError("slow"))
    assert not policy.retries(PermissionError("refused"))


def test_rate_is_the_factor_of_exponential_backoff() -> None:
    doubling = RetryPolicy(base="PT1S", cap="PT1H", jitter="none")
    tripling = RetryPolicy(base="PT1S", cap="PT1H", jitter="none", rate=3.0)
    flat = RetryPolicy(base="PT1S", cap="PT1H", jitter="none", rate=1)
    assert [doubling.delay(n, lambda: 0.5) for n in (1, 2, 3)] == [1, 2, 4]
    assert [tripling.delay(n, lambda: 0.5) for n in (1, 2, 3)] == [1, 3, 9]
    assert [flat.delay(n, lambda: 0.5) for n in (1, 2, 3)] == [1, 1, 1]


def test_a_huge_rate_stops_at_the_cap() -> None:
    policy = RetryPolicy(base="PT1S", cap="PT5M", jitter="none", rate=1e300)
    assert policy.delay(50, lambda: 0.5) == 300


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0.5}, "rate: must be a number >= 1"),
        ({"rate": True}, "rate: must be a number >= 1"),
        ({"rate": float("inf")}, "rate: must be a number >= 1"),
        ({"rate": 3.0, "backoff": "linear"}, "rate: applies to exponential backoff only"),
        ({"retry_on": [ValueError]}, "retry_on: must be a tuple of exception classes"),
        ({"retry_on": ("ValueError",)}, "retry_on: must be a tuple of exception classes"),
        ({"at_most_once": "yes"}, "at_most_once: must be True or False"),
    ],
)
def test_out_of_range_values_are_refused_when_defined(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message):
        RetryPolicy(**kwargs)


def test_the_stored_policy_names_the_new_fields_only_when_set() -> None:
    assert set(RetryPolicy().to_json()) == {
        "maxAttempts",
        "backoff",
        "base",
        "cap",
        "jitter",
        "nonRetryable",
    }
    stored = RetryPolicy(retry_on=(TimeoutError,), rate=1.5, at_most_once=True).to_json()
    assert stored["retryOn"] == ["builtins.TimeoutError"]
    assert (stored["rate"], stored["atMostOnce"]) == (1.5, True)
