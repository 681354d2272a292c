"""The engine's exception hierarchy: one root, a few branches callers can catch."""

from __future__ import annotations


class WorkflowRunnerError(Exception):
    """Root of every error the engine raises on purpose."""


class InvalidInput(WorkflowRunnerError):
    """Input from outside (an event, a command, a file) is malformed.

    The message says what is wrong and where; nothing has been written.
    """


class InvalidDuration(InvalidInput):
    """An ISO-8601 duration or instant could not be parsed."""


class InvalidEventMatch(InvalidInput):
    """An EventMatch expression does not follow the grammar."""


class InvalidCronExpression(InvalidInput):
    """A cron expression could not be parsed."""


class WorkflowDefinitionError(WorkflowRunnerError):
    """A workflow definition is malformed (raised when it is defined)."""


class DefinitionArgumentError(WorkflowDefinitionError):
    """An argument of `where` (a step method, RetryPolicy) has a value it cannot take:
    `argument` names it, `detail` says what is wrong with the value."""

    def __init__(self, where: str, argument: str, detail: str) -> None:
        super().__init__(f"{where}: {argument}: {detail}")
        self.argument = argument
        self.detail = detail


class UnknownWorkflow(WorkflowRunnerError):
    """No registered workflow has this name (or this definition fingerprint)."""


class StoreError(WorkflowRunnerError):
    """The database failed; the wrapped driver error is the cause."""


class TransientStoreError(StoreError):
    """A database failure worth retrying (connection lost, serialization, deadlock).

    `lost_race`: the server rolled the transaction back to let another one through (a
    deadlock or a serialization failure); the connection is fine, and the same work in a
    fresh transaction may succeed at once."""

    def __init__(self, message: str, lost_race: bool = False) -> None:
        super().__init__(message)
        self.lost_race = lost_race


class StreamConflict(StoreError):
    """An append met an event already at one of its versions: another writer moved the
    stream since it was read (a plain insert refuses; the transaction is aborted)."""


class NotConfigured(WorkflowRunnerError):
    """A part the caller needs was not set up (no runtime installed, a setting missing)."""


class WorkLeft(WorkflowRunnerError):
    """An operation ran out of its time budget with work left; what it did is committed,
    and running it again continues it (a handler raises it so that its input is
    delivered again)."""


class DidNotSettle(WorkflowRunnerError):
    """A driver loop (the local runtime, the in-process app) kept finding work to do:
    a runaway loop of resumes, nudges or messages."""


class RunNotFound(WorkflowRunnerError):
    """No run with this id exists for this tenant (`message`: what the caller looked
    for, when it said more than the id)."""

    def __init__(self, tenant_id: str, run_id: str, message: str | None = None) -> None:
        super().__init__(message or f"run {run_id} not found for tenant {tenant_id}")
        self.tenant_id = tenant_id
        self.run_id = run_id


class HostGone(WorkflowRunnerError):
    """The kept function version a run's work was handed to no longer exists (it was
    deleted): the run's definition runs nowhere any more (definition/hosts.py)."""

    def __init__(self, host: str) -> None:
        super().__init__(f"the kept version {host} is gone")
        self.host = host


class ForwardFailed(WorkflowRunnerError):
    """A kept function version did not answer (throttled, timed out, or it raised): the
    work is tried again later (a resume by its queue, a task when its lease ends)."""
