"""Retry policies: how often a task or a delivery is tried again, and how long apart."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..durations import canonical_duration, parse_duration
from ..errors import DefinitionArgumentError, InvalidInput, WorkflowRunnerError

BackoffKind: TypeAlias = Literal["linear", "exponential", "fixed"]
JitterKind: TypeAlias = Literal["none", "full", "equal"]


def backoff_problems(
    backoff: object, jitter: object, base: object, cap: object
) -> list[tuple[str, str]]:
    """(argument, what is wrong) for each backoff parameter a policy cannot take."""
    problems = []
    if backoff not in ("linear", "exponential", "fixed"):
        problems.append(("backoff", f"must be linear, exponential or fixed, not {backoff!r}"))
    if jitter not in ("none", "full", "equal"):
        problems.append(("jitter", f"must be none, full or equal, not {jitter!r}"))
    for name, value in (("base", base), ("cap", cap)):
        if not isinstance(value, str):
            problems.append((name, f"must be a duration string, not {value!r}"))
            continue
        try:
            parse_duration(value)
        except InvalidInput as error:
            problems.append((name, str(error)))
    return problems


def check_backoff(where: str, backoff: object, jitter: object, base: object, cap: object) -> None:
    """Raises: DefinitionArgumentError: the first parameter a backoff cannot take."""
    for argument, message in backoff_problems(backoff, jitter, base, cap):
        raise DefinitionArgumentError(where, argument, message)


# Set while define_workflow calls the user's steps= function (see deferred_policy_checks).
_deferring: ContextVar[bool] = ContextVar("retry_policy_checks_deferred", default=False)


@contextmanager
def deferred_policy_checks() -> Iterator[None]:
    """While the step tree is built, a RetryPolicy with a bad parameter keeps its problems
    (`RetryPolicy.problems`) instead of raising where it is built, so that the
    definition's walk reports each with the step that uses it and the argument."""
    token = _deferring.set(True)
    try:
        yield
    finally:
        _deferring.reset(token)


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


# The jitter of a RetryPolicy that does not name one: none, as for `s.retry` and as
# Step Functions and Temporal do (a first retry with base "PT2S" comes after 2 s).
DEFAULT_JITTER: JitterKind = "none"
# What a policy that leaves `jitter` unset hashes into its definition's fingerprint: the
# default of the releases before DEFAULT_JITTER became "none". Definitions written then
# keep their fingerprints, so their waiting runs still resume after the upgrade.
_UNSET_JITTER_FINGERPRINT = "full"


@dataclass(frozen=True, init=False)
class RetryPolicy:
    """How a task (or a delivery) is retried.

    Args:
        max_attempts: all attempts, the first included (>= 1; default 3).
        backoff: delay before attempt n+1 grows `exponential` (base * 2**(n-1), the
            default), `linear` (base * n) or stays `fixed` (base).
        base: the first delay, a duration ("PT1S", "1s"; default 1 s; stored as ISO-8601).
        cap: the duration no single delay exceeds ("PT5M", "5m"; default 5 min).
        jitter: `none` (the default) uses the delay as is, `full` draws it uniformly from
            [0, delay], `equal` from [delay/2, delay].
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

    Raises:
        DefinitionArgumentError: a parameter is out of range or not a duration (inside a
            workflow's steps= function, the definition reports it with its step instead).
    """

    max_attempts: int
    backoff: BackoffKind
    base: str
    cap: str
    jitter: JitterKind
    non_retryable: tuple[type[BaseException], ...]
    retry_on: tuple[type[BaseException], ...] | None
    rate: float
    at_most_once: bool
    # Whether `jitter` was given (its fingerprint then hashes it as given).
    jitter_given: bool = field(init=False, repr=False, compare=False)
    # (argument, what is wrong) of a policy built while checks were deferred: the
    # definition using it is refused, so such a policy never runs.
    problems: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        max_attempts: int = 3,
        backoff: BackoffKind = "exponential",
        base: str = "PT1S",
        cap: str = "PT5M",
        jitter: JitterKind | None = None,
        non_retryable: tuple[type[BaseException], ...] = (),
        retry_on: tuple[type[BaseException], ...] | None = None,
        rate: float = _DEFAULT_RATE,
        at_most_once: bool = False,
    ) -> None:
        chosen = DEFAULT_JITTER if jitter is None else jitter
        problems = []
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            problems.append(("max_attempts", f"must be an integer >= 1, not {max_attempts!r}"))
        problems += backoff_problems(backoff, chosen, base, cap)
        if retry_on is not None and not _exception_classes(retry_on):
            problems.append(
                ("retry_on", f"must be a tuple of exception classes (or None), not {retry_on!r}")
            )
        if (
            isinstance(rate, bool)
            or not isinstance(rate, (int, float))
            or not math.isfinite(rate)
            or rate < 1
        ):
            problems.append(("rate", f"must be a number >= 1, not {rate!r}"))
        elif rate != _DEFAULT_RATE and backoff != "exponential":
            problems.append(("rate", f"applies to exponential backoff only, not {backoff!r}"))
        if not isinstance(at_most_once, bool):
            problems.append(("at_most_once", f"must be True or False, not {at_most_once!r}"))
        if not _exception_classes(non_retryable):
            problems.append(
                ("non_retryable", f"must be a tuple of exception classes, not {non_retryable!r}")
            )
        if problems and not _deferring.get():
            argument, message = problems[0]
            raise DefinitionArgumentError("RetryPolicy", argument, message)
        durations_valid = not any(argument in ("base", "cap") for argument, _ in problems)
        assign = object.__setattr__  # frozen
        assign(self, "max_attempts", max_attempts)
        assign(self, "backoff", backoff)
        # Stored with delivery requests and hashed into fingerprints: always ISO-8601.
        assign(self, "base", canonical_duration(base) if durations_valid else base)
        assign(self, "cap", canonical_duration(cap) if durations_valid else cap)
        assign(self, "jitter", chosen)
        assign(self, "non_retryable", non_retryable)
        assign(self, "retry_on", retry_on)
        assign(self, "rate", rate)
        assign(self, "at_most_once", at_most_once)
        assign(self, "jitter_given", jitter is not None)
        assign(self, "problems", tuple(problems))

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

    def fingerprint_json(self) -> dict[str, Any]:
        """The policy as its definition's fingerprint hashes it (to_json, with an unset
        jitter hashed as the releases before this default hashed it)."""
        shown = self.to_json()
        if not self.jitter_given:
            shown["jitter"] = _UNSET_JITTER_FINGERPRINT
        return shown

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
