"""workflow-runner: a durable, event-sourced workflow engine on PostgreSQL.

Public API::

    from workflow_runner import define_workflow, on_event, on_cron, run_id_for, RetryPolicy
"""

from __future__ import annotations

from .clock import Clock, ManualClock, SystemClock
from .definition import (
    DomainEvent,
    StepContext,
    WorkflowDefinition,
    WorkflowInfo,
    WorkflowRegistry,
    default_registry,
    define_workflow,
    load_workflow_modules,
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

__all__ = [
    "Clock",
    "DomainEvent",
    "InvalidInput",
    "ManualClock",
    "RetryPolicy",
    "RunNotFound",
    "StepContext",
    "StoreError",
    "SystemClock",
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
    "on_cron",
    "on_event",
    "run_id_for",
]
