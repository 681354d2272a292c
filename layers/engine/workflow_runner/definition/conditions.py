"""What a wait_for_condition's check returns: `Done(value)` ends the wait with `value`
under the step's key, `Continue(state)` checks again later with `state`; and the delay
between checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeAlias

from ..durations import parse_duration
from ..errors import InvalidInput, WorkflowDefinitionError
from ..refs import Ref
from ..storable import NotStorable, check_storable
from .dsl import Resolver, StepContext, WaitForCondition

ConditionBackoff: TypeAlias = Literal["fixed", "exponential"]
CONDITION_BACKOFFS: tuple[ConditionBackoff, ...] = ("fixed", "exponential")


@dataclass(frozen=True)
class Done:
    """The condition holds: the wait ends and `value` (JSON) lands under the step's key."""

    value: Any = None


@dataclass(frozen=True)
class Continue:
    """The condition does not hold yet: check again after the next delay, with `state`
    (JSON) as the check's second argument."""

    state: Any = None


def condition_delay(every: str, backoff: str, cap: str | None, checks_done: int) -> timedelta:
    """The delay after check `checks_done` (1-based): `every` (fixed), or
    `every * 2**(checks_done-1)` (exponential), at most `cap` when one is given."""
    first = parse_duration(every)
    # Bounded exponent: beyond 2**40 times any delay the cap (or forever) decides.
    delay = first * 2 ** min(checks_done - 1, 40) if backoff == "exponential" else first
    if cap is not None:
        delay = min(delay, parse_duration(cap))
    return delay


def condition_step(
    key: object,
    check: Callable[[StepContext, Any], Any],
    initial: Resolver,
    every: object,
    backoff: object,
    cap: object,
    max_attempts: object,
    timeout: object,
    catch: object,
) -> WaitForCondition:
    """The step `s.wait_for_condition(...)` builds, its literal arguments checked."""
    if not isinstance(key, str) or not key:
        raise WorkflowDefinitionError("wait_for_condition: key must be a non-empty string")
    where = f"wait_for_condition({key!r})"
    if not callable(check):
        raise WorkflowDefinitionError(
            f"{where}: check must be a function of ctx and the state returning "
            "Done(value) or Continue(new_state)"
        )
    if initial is not None and not callable(initial):
        try:
            check_storable(_placeholder(initial), "the initial state")
        except NotStorable as error:
            raise WorkflowDefinitionError(f"{where}: {error}") from None
    every_delay = _positive_duration(where, "every", every)
    if backoff not in CONDITION_BACKOFFS:
        raise WorkflowDefinitionError(
            f"{where}: {backoff!r} is not a backoff: give 'fixed' or 'exponential'"
        )
    if cap is not None:
        if backoff != "exponential":
            raise WorkflowDefinitionError(
                f"{where}: {cap!r} caps an exponential backoff only; "
                "give backoff='exponential' or drop cap"
            )
        if _positive_duration(where, "cap", cap) < every_delay:
            raise WorkflowDefinitionError(
                f"{where}: {cap!r} is shorter than the first delay (every=)"
            )
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
    ):
        raise WorkflowDefinitionError(
            f"{where}: max_attempts must be an integer >= 1 or None, not {max_attempts!r}"
        )
    if timeout is not None:
        _positive_duration(where, "timeout", timeout)
    if not isinstance(catch, bool):
        raise WorkflowDefinitionError(f"{where}: catch must be True or False")
    return WaitForCondition(
        key=key,
        check=check,
        initial=initial,
        every=str(every),
        backoff=str(backoff),
        cap=None if cap is None else str(cap),
        max_attempts=max_attempts,
        timeout=None if timeout is None else str(timeout),
        catch=catch,
    )


def _positive_duration(where: str, name: str, value: object) -> timedelta:
    """A literal ISO-8601 duration longer than zero (what a condition's timing takes)."""
    if not isinstance(value, str):
        raise WorkflowDefinitionError(
            f"{where}: {name} must be an ISO-8601 duration string such as 'PT30S', not {value!r}"
        )
    try:
        delta = parse_duration(value)
    except InvalidInput:
        raise WorkflowDefinitionError(
            f"{where}: {value!r} is not an ISO-8601 duration such as 'PT30S' or 'PT5M'"
        ) from None
    if delta <= timedelta(0):
        raise WorkflowDefinitionError(f"{where}: {value!r} must be longer than zero")
    return delta


def _placeholder(value: Any) -> Any:
    """`value` with every reference replaced by a scalar (a reference resolves later)."""
    if isinstance(value, Ref):
        return 0
    if isinstance(value, dict):
        return {k: _placeholder(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_placeholder(v) for v in value]
    return value


class ConditionSteps:
    """`s.wait_for_condition` (mixed into StepBuilder)."""

    def wait_for_condition(
        self,
        key: str,
        check: Callable[[StepContext, Any], Any],
        initial: Resolver = None,
        every: str = "PT30S",
        backoff: ConditionBackoff = "fixed",
        cap: str | None = None,
        max_attempts: int | None = None,
        timeout: str | None = None,
        catch: bool = False,
    ) -> WaitForCondition:
        """Poll: run `check(ctx, state)` now, and again after each delay until it
        returns `Done(value)`; `value` then lands under `key`.

        `check` returns `Done(value)` or `Continue(new_state)` (both from
        `workflow_runner`); `state` is `initial` (resolvable) for the first check and
        the last `Continue`'s state after. Each check is recorded with its state on the
        run's stream, and the run holds nothing while it waits: the delays are durable
        timers, as `s.wait`'s. A crash repeats only the check it interrupted, with the
        state recorded before it.

        Args:
            key: where Done's value lands (unique in the workflow).
            check: a function of ctx and the state; runs in the pass, so keep it short
                (call a slow service from a `s.task` before it, or keep the check quick).
            initial: the first check's state (JSON; a value, a reference or a function
                of ctx).
            every: ISO-8601 duration between checks (the first delay, exponential).
            backoff: "fixed" (every delay is `every`) or "exponential" (delay n is
                `every * 2**(n-1)`).
            cap: the longest delay (exponential only; default: no cap).
            max_attempts: the most checks (the first included); None: no limit.
            timeout: ISO-8601 duration from the first check after which the wait gives
                up (a last check runs at that instant); None: no limit.
            catch: on failure go on with `{"failed": true, "reason": ..., "error":
                "<Class>" (a check that raised), "attempts": n}` under `key` instead of
                failing the run.

        A check that raises (or returns something else) fails the step at once with
        reason `condition_check_failed`; running out of checks or time fails it with
        `condition_not_met`.
        """
        return condition_step(
            key, check, initial, every, backoff, cap, max_attempts, timeout, catch
        )
