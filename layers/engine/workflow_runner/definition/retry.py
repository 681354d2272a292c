"""Retry policies: how often a task or a delivery is tried again, and how long apart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..durations import canonical_duration, parse_duration
from ..errors import WorkflowDefinitionError

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
            raise WorkflowDefinitionError(f"{where}: {name} must be a duration string")
        parse_duration(value)


def backoff_seconds(
    backoff: str, base: str, cap: str, jitter: str, failed_attempt: int, draw: Callable[[], float]
) -> float:
    """Delay before the attempt after `failed_attempt` (1-based): `base * n` (linear),
    `base * 2**(n-1)` (exponential) or `base` (fixed), at most `cap`; full jitter draws
    from [0, delay], equal jitter from [delay/2, delay]. `draw()` returns [0, 1)."""
    first = parse_duration(base).total_seconds()
    ceiling = parse_duration(cap).total_seconds()
    if backoff == "linear":
        delay = first * failed_attempt
    elif backoff == "exponential":
        delay = first * 2.0 ** min(failed_attempt - 1, 60)
    else:
        delay = first
    delay = min(ceiling, delay)
    if jitter == "full":
        return delay * draw()
    if jitter == "equal":
        return delay / 2 + delay / 2 * draw()
    return delay


@dataclass(frozen=True)
class RetryPolicy:
    """How a task (or a delivery) is retried.

    Args:
        max_attempts: all attempts, the first included (>= 1).
        backoff: delay before attempt n+1 grows `linear` (base * n), `exponential`
            (base * 2**(n-1)) or stays `fixed` (base).
        base: the first delay, a duration ("PT1S", "1s"; stored as ISO-8601).
        cap: the duration no single delay exceeds ("PT5M", "5m").
        jitter: `full` draws the delay uniformly from [0, delay], `equal` from
            [delay/2, delay], `none` uses it as is.
        non_retryable: exception classes (and their subclasses) that fail the task at
            once, without another attempt.
    """

    max_attempts: int = 3
    backoff: BackoffKind = "exponential"
    base: str = "PT1S"
    cap: str = "PT5M"
    jitter: JitterKind = "full"
    non_retryable: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise WorkflowDefinitionError(
                f"RetryPolicy: max_attempts must be an integer >= 1, not {attempts!r}"
            )
        check_backoff("RetryPolicy", self.backoff, self.jitter, self.base, self.cap)
        # Stored with delivery requests and hashed into fingerprints: always ISO-8601.
        object.__setattr__(self, "base", canonical_duration(self.base))
        object.__setattr__(self, "cap", canonical_duration(self.cap))
        classes = self.non_retryable
        if not isinstance(classes, tuple) or not all(
            isinstance(c, type) and issubclass(c, BaseException) for c in classes
        ):
            raise WorkflowDefinitionError(
                f"RetryPolicy: non_retryable must be a tuple of exception classes, not {classes!r}"
            )

    def delay(self, failed_attempt: int, draw: Callable[[], float]) -> float:
        """Seconds before the attempt after `failed_attempt` (1-based)."""
        return backoff_seconds(self.backoff, self.base, self.cap, self.jitter, failed_attempt, draw)

    def retries(self, error: BaseException) -> bool:
        """Whether an attempt that raised `error` may be followed by another."""
        return not isinstance(error, self.non_retryable)

    def to_json(self) -> dict[str, Any]:
        """The policy as stored with a delivery request and drawn by the graph."""
        return {
            "maxAttempts": self.max_attempts,
            "backoff": self.backoff,
            "base": self.base,
            "cap": self.cap,
            "jitter": self.jitter,
            "nonRetryable": [f"{c.__module__}.{c.__qualname__}" for c in self.non_retryable],
        }
