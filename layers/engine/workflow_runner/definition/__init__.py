"""Workflow definitions: the step language, fingerprints and the registry."""

from __future__ import annotations

from .builder import StepBuilder
from .define import define_workflow
from .dsl import (
    Branch,
    Compute,
    CronTrigger,
    DomainEvent,
    EventTrigger,
    ForEach,
    MailSend,
    Resolver,
    Retry,
    Return,
    Step,
    StepContext,
    Task,
    Trigger,
    Wait,
    WaitForCallback,
    WaitForEvent,
    WebhookSend,
    WorkflowDefinition,
    WorkflowInfo,
    on_cron,
    on_event,
    resolve,
    run_id_for,
)
from .fingerprint import compute_fingerprint
from .registry import (
    DEFAULT_WORKFLOW_MODULES,
    WorkflowRegistry,
    default_registry,
    load_workflow_modules,
)
from .retry import RetryPolicy, backoff_seconds

__all__ = [
    "DEFAULT_WORKFLOW_MODULES",
    "Branch",
    "Compute",
    "CronTrigger",
    "DomainEvent",
    "EventTrigger",
    "ForEach",
    "MailSend",
    "Resolver",
    "Retry",
    "RetryPolicy",
    "Return",
    "Step",
    "StepBuilder",
    "StepContext",
    "Task",
    "Trigger",
    "Wait",
    "WaitForCallback",
    "WaitForEvent",
    "WebhookSend",
    "WorkflowDefinition",
    "WorkflowInfo",
    "WorkflowRegistry",
    "backoff_seconds",
    "compute_fingerprint",
    "default_registry",
    "define_workflow",
    "load_workflow_modules",
    "on_cron",
    "on_event",
    "resolve",
    "run_id_for",
]
