"""The callback steps of the definition language: their builder methods, mixed into
StepBuilder, with their definition-time checks (checks.py reports a refused one with
its place in the tree)."""

from __future__ import annotations

from datetime import timedelta

from ..durations import canonical_duration, is_duration, parse_duration
from ..errors import WorkflowDefinitionError
from .dsl import AwaitCallback, CreateCallback, Resolver, WaitForCallback


class CallbackSteps:
    """`s.wait_for_callback`, `s.create_callback` and `s.await_callback`.

    The builder notes the names created so far: an await of a name no create_callback
    before it makes is refused (steps are built in the order they are written).
    """

    _created_callbacks: set[str]

    def wait_for_callback(
        self,
        result_key: str,
        timeout: Resolver = "P7D",
        heartbeat: str | None = None,
        catch: bool = False,
    ) -> WaitForCallback:
        """Suspend until an outside system answers the callback, or `timeout` (a duration
        or an instant) passes.

        The steps before it in the same pass read the token as `ctx.callback.token` (and
        the endpoint's link as `ctx.callback.url`) to hand it out, e.g. in a mail. The
        payload (None on timeout) is stored under `result_key`. A token is single-use,
        bound to this run and this wait, and expires with the timeout.

        Args:
            heartbeat: an ISO-8601 duration (at least PT1M): the wait also times out when
                no heartbeat arrives that long after the last one (or the wait's start).
            catch: an answer that reports a failure stores `{"failed": true, "error":
                NAME}` under `result_key` instead of failing the run (callback_failed).
        """
        _check_name("wait_for_callback", "result_key", result_key)
        _check_callback("wait_for_callback", timeout, heartbeat, catch)
        return WaitForCallback(
            result_key=result_key,
            timeout=_stored(timeout),
            heartbeat=_stored(heartbeat),
            catch=catch,
        )

    def create_callback(
        self, name: str, timeout: Resolver = "P7D", heartbeat: str | None = None
    ) -> CreateCallback:
        """Make callback `name` and go on: every later step (a task's function too) reads
        its token as `ctx.callbacks[name].token` and the endpoint's link as `.url`.

        It takes one answer (a completion or a failure) until `timeout` (a duration or an
        instant) and, with `heartbeat`, while heartbeats keep coming that often. An
        answer that comes before the run reaches `s.await_callback(name)` is kept for
        it. Created again (a loop), the earlier callback of that name closes.
        """
        _check_name("create_callback", "name", name)
        _check_callback(f"create_callback({name!r})", timeout, heartbeat, False)
        self._created_callbacks.add(name)
        return CreateCallback(name=name, timeout=_stored(timeout), heartbeat=_stored(heartbeat))

    def await_callback(
        self, name: str, result_key: str | None = None, catch: bool = False
    ) -> AwaitCallback:
        """Suspend until callback `name` (made by an earlier create_callback) has its
        answer, and store it under `result_key` (default: `name`): its payload, None when
        it expired, `{"failed": true, "error": NAME}` for a failure with `catch=True`
        (without: the run fails, reason callback_failed). An answer that came before
        is taken at once.
        """
        _check_name("await_callback", "name", name)
        if result_key is not None:
            _check_name(f"await_callback({name!r})", "result_key", result_key)
        _check_callback(f"await_callback({name!r})", None, None, catch)
        if name not in self._created_callbacks:
            known = ", ".join(repr(n) for n in sorted(self._created_callbacks)) or "none"
            raise WorkflowDefinitionError(
                f"await_callback: no create_callback before it makes {name!r} (created: {known})"
            )
        return AwaitCallback(name=name, result_key=result_key or name, catch=catch)


# The shortest heartbeat interval: the due scan looks for timed-out waits once a minute.
MIN_HEARTBEAT = timedelta(minutes=1)


def _check_name(where: str, argument: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise WorkflowDefinitionError(f"{where}: {argument} must be a non-empty string")


def _stored(value: Resolver) -> Resolver:
    """A static duration as definitions store it (ISO-8601, whichever spelling was
    given); an instant, a resolver or None as given."""
    return canonical_duration(value) if isinstance(value, str) and is_duration(value) else value


def _check_callback(where: str, timeout: Resolver, heartbeat: object, catch: object) -> None:
    if isinstance(timeout, str) and timeout.startswith("P"):
        parse_duration(timeout)
    if heartbeat is not None:
        if not isinstance(heartbeat, str):
            raise WorkflowDefinitionError(
                f"{where}: heartbeat must be an ISO-8601 duration such as 'PT5M'"
            )
        interval = parse_duration(heartbeat)
        if interval < MIN_HEARTBEAT:
            raise WorkflowDefinitionError(f"{where}: heartbeat {heartbeat!r} is under PT1M")
        static = isinstance(timeout, str) and is_duration(timeout)
        if static and interval >= parse_duration(str(timeout)):
            raise WorkflowDefinitionError(
                f"{where}: heartbeat {heartbeat!r} is not shorter than timeout "
                f"{timeout!r} (it would never end the wait first)"
            )
    if not isinstance(catch, bool):
        raise WorkflowDefinitionError(f"{where}: catch must be True or False")
