"""workflow-runner: a durable, event-sourced workflow engine on PostgreSQL.

Public API::

    from workflow_runner import define_workflow, on_event, on_cron, on_call, run_id_for, RetryPolicy
    from workflow_runner import Completion, TaskInterrupted   # map/parallel batches, tasks
    from workflow_runner import Event, Steps, Scope, ref      # references, no lambda needed
    from workflow_runner import Concurrency, Throttle, RateLimit, Singleton, Debounce  # limits
    from workflow_runner import Done, Continue                 # what a condition's check returns
    from workflow_runner.match import eq, in_, all_of, ...     # EventMatch builders
    from workflow_runner.testing import WorkflowTestEnv        # tests of your workflows
"""

from __future__ import annotations

from .clock import Clock, ManualClock, SystemClock
from .definition import (
    Completion,
    Continue,
    DomainEvent,
    Done,
    RetryPolicy,
    StepContext,
    TaskInterrupted,
    WorkflowDefinition,
    WorkflowInfo,
    WorkflowRegistry,
    default_registry,
    define_workflow,
    load_workflow_modules,
    on_call,
    on_cron,
    on_event,
    run_id_for,
)
from .errors import (
    InvalidInput,
    RunNotFound,
    StoreError,
    TransientStoreError,
    UnknownWorkflow,
    WorkflowDefinitionError,
    WorkflowRunnerError,
)
from .flow import Batch, CancelOn, Concurrency, Debounce, RateLimit, Singleton, Throttle
from .refs import Event, Scope, Steps, ref

__all__ = [
    "Batch",
    "CancelOn",
    "Clock",
    "Completion",
    "Concurrency",
    "Continue",
    "Debounce",
    "DomainEvent",
    "Done",
    "Event",
    "InvalidInput",
    "ManualClock",
    "RateLimit",
    "RetryPolicy",
    "RunNotFound",
    "Scope",
    "Singleton",
    "StepContext",
    "Steps",
    "StoreError",
    "SystemClock",
    "TaskInterrupted",
    "Throttle",
    "TransientStoreError",
    "UnknownWorkflow",
    "WorkflowDefinition",
    "WorkflowDefinitionError",
    "WorkflowInfo",
    "WorkflowRegistry",
    "WorkflowRunnerError",
    "default_registry",
    "define_workflow",
    "load_workflow_modules",
    "on_call",
    "on_cron",
    "on_event",
    "ref",
    "run_id_for",
]
