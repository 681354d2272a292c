"""Retry policies: how often a task or a delivery is tried again, and how long apart."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..durations import parse_duration
from ..errors import WorkflowDefinitionError, WorkflowRunnerError

BackoffKind: TypeAlias = Literal["linear", "exponential", "fixed"]
JitterKind: TypeAlias = Literal["none", "full", "equal"]


def check_backoff(where: str, backoff: object, jitter: object, base: object, cap: object) -> None:
    if backoff not in ("linear", "exponential", "fixed"):
        raise WorkflowDefinitionError(
            f"{where}: backoff must be linear, exponential or fixed, not {backoff!r}"
        )
    if jitter not in ("none", "full", "equal"):
        raise WorkflowDefinitionError(
            f"{where}: jitter must be none, full or equal, not {jitter!r}"
        )
    for name, value in (("base", base), ("cap", cap)):
        if not isinstance(value, str):
            raise WorkflowDefinitionError(f"{where}: {name} must be an ISO-8601 duration string")
        parse_duration(value)


def backoff_seconds(
    backoff: str,
    base: str,
    cap: str,
    jitter: str,
    failed_attempt: int,
    draw: Callable[[], float],
    rate: float = 2.0,
) -> float:
    """Delay before the attempt after `failed_attempt` (1-based): `base * n` (linear),
    `base * rate**(n-1)` (exponential) or `base` (fixed), at most `cap`; full jitter
    draws from [0, delay], equal jitter from [delay/2, delay]. `draw()` returns [0, 1)."""
    first = parse_duration(base).total_seconds()
    ceiling = parse_duration(cap).total_seconds()
    if backoff == "linear":
        delay = first * failed_attempt
    elif backoff == "exponential":
        try:
            delay = first * float(rate) ** min(failed_attempt - 1, 60)
        except OverflowError:
            delay = ceiling
    else:
        delay = first
    delay = min(ceiling, delay)
    if jitter == "full":
        return delay * draw()
    if jitter == "equal":
        return delay / 2 + delay / 2 * draw()
    return delay


class TaskInterrupted(WorkflowRunnerError):
    """An attempt of an at-most-once task was interrupted before its outcome was recorded
    (its worker died, or a Lambda timeout ended it): it may have done its work, so it is
    not run again blindly. It counts as a failed attempt that raised this error: list it
    in `non_retryable` (or leave it out of `retry_on`) to end the task at once, with
    reason `task_interrupted`."""


_DEFAULT_RATE = 2.0


def _exception_classes(value: object) -> bool:
    return isinstance(value, tuple) and all(
        isinstance(c, type) and issubclass(c, BaseException) for c in value
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How a task (or a delivery) is retried.

    Args:
        max_attempts: all attempts, the first included (>= 1).
        backoff: delay before attempt n+1 grows `linear` (base * n), `exponential`
            (base * rate**(n-1)) or stays `fixed` (base).
        base: ISO-8601 duration of the first delay.
        cap: ISO-8601 duration no single delay exceeds.
        jitter: `full` draws the delay uniformly from [0, delay], `equal` from
            [delay/2, delay], `none` uses it as is.
        non_retryable: exception classes (and their subclasses) that fail the task at
            once, without another attempt.
        retry_on: the exception classes (and their subclasses) worth another attempt;
            any other fails the task at once. None (the default): every exception but
            those in `non_retryable`, which wins where both name a class.
        rate: the factor an exponential backoff grows by (>= 1; 2.0 doubles each delay).
        at_most_once: an attempt interrupted before its outcome was recorded (its worker
            died) is not run again as it was: it ends as a failed attempt with
            `TaskInterrupted` (reason `task_interrupted`), which the policy judges like
            any exception (another attempt follows only if `retry_on`/`non_retryable`
            and `max_attempts` allow it, after the backoff). False (the default): the
            interrupted attempt counts as failed (`TaskLeaseExpired`) and the next one
            runs at once (at least once).
    """

    max_attempts: int = 3
    backoff: BackoffKind = "exponential"
    base: str = "PT1S"
    cap: str = "PT5M"
    jitter: JitterKind = "full"
    non_retryable: tuple[type[BaseException], ...] = ()
    retry_on: tuple[type[BaseException], ...] | None = None
    rate: float = _DEFAULT_RATE
    at_most_once: bool = False

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise WorkflowDefinitionError(
                f"RetryPolicy: max_attempts must be an integer >= 1, not {attempts!r}"
            )
        check_backoff("RetryPolicy", self.backoff, self.jitter, self.base, self.cap)
        if not _exception_classes(self.non_retryable):
            raise WorkflowDefinitionError(
                "RetryPolicy: non_retryable must be a tuple of exception classes, "
                f"not {self.non_retryable!r}"
            )
        if self.retry_on is not None and not _exception_classes(self.retry_on):
            raise WorkflowDefinitionError(
                "RetryPolicy: retry_on must be a tuple of exception classes (or None: "
                f"every exception), not {self.retry_on!r}"
            )
        rate = self.rate
        if (
            isinstance(rate, bool)
            or not isinstance(rate, (int, float))
            or not math.isfinite(rate)
            or rate < 1
        ):
            raise WorkflowDefinitionError(f"RetryPolicy: rate must be a number >= 1, not {rate!r}")
        if rate != _DEFAULT_RATE and self.backoff != "exponential":
            raise WorkflowDefinitionError(
                f"RetryPolicy: rate applies to exponential backoff only, not {self.backoff!r}"
            )
        if not isinstance(self.at_most_once, bool):
            raise WorkflowDefinitionError(
                f"RetryPolicy: at_most_once must be True or False, not {self.at_most_once!r}"
            )

    def delay(self, failed_attempt: int, draw: Callable[[], float]) -> float:
        """Seconds before the attempt after `failed_attempt` (1-based)."""
        return backoff_seconds(
            self.backoff, self.base, self.cap, self.jitter, failed_attempt, draw, self.rate
        )

    def retries(self, error: BaseException) -> bool:
        """Whether an attempt that raised `error` may be followed by another."""
        if isinstance(error, self.non_retryable):
            return False
        return self.retry_on is None or isinstance(error, self.retry_on)

    def to_json(self) -> dict[str, Any]:
        """The policy as stored with a delivery request, drawn by the graph and hashed
        into the fingerprint (the fields added later only when they are set: a
        definition written before them keeps its fingerprint)."""
        stored: dict[str, Any] = {
            "maxAttempts": self.max_attempts,
            "backoff": self.backoff,
            "base": self.base,
            "cap": self.cap,
            "jitter": self.jitter,
            "nonRetryable": [_class_name(c) for c in self.non_retryable],
        }
        if self.retry_on is not None:
            stored["retryOn"] = [_class_name(c) for c in self.retry_on]
        if self.rate != _DEFAULT_RATE:
            stored["rate"] = self.rate
        if self.at_most_once:
            stored["atMostOnce"] = True
        return stored


def _class_name(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
