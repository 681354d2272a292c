"""Pydantic models of the functions' inputs (parsed with the Powertools parser)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


def _uuid(value: str, what: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError) as error:
        raise ValueError(f"{what} must be a UUID") from error


class ResumeMessage(BaseModel):
    """A resume request: the SQS message body and the direct-invoke payload alike.

    Strict: `force` must be a JSON boolean (`"yes"` or `1` would otherwise be coerced to
    true and resume a wait early) and `stepIndex` an integer; unknown fields are refused.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    tenant_id: str = Field(alias="tenantId")
    run_id: str = Field(alias="runId")
    step_index: int = Field(alias="stepIndex", ge=0)
    force: bool = False
    # Set by another version that hands the request here as the kept code of the run's
    # definition (aws/versions.py): it is never handed on.
    forwarded_from: str | None = Field(
        default=None, alias="forwardedFrom", min_length=1, max_length=256
    )

    @field_validator("tenant_id")
    @classmethod
    def _tenant(cls, value: str) -> str:
        return _uuid(value, "tenantId")

    @field_validator("run_id")
    @classmethod
    def _run(cls, value: str) -> str:
        return _uuid(value, "runId")


class HandedTask(BaseModel):
    """A claimed task another StepDispatcher version hands here (aws/versions.py)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    tenant_id: str = Field(alias="tenantId")
    task_id: str = Field(alias="taskId")
    attempt: int = Field(ge=1)
    lost_attempt: bool = Field(alias="lostAttempt")
    forwarded_from: str = Field(alias="forwardedFrom", min_length=1, max_length=256)

    @field_validator("tenant_id", "task_id")
    @classmethod
    def _ids(cls, value: str) -> str:
        return _uuid(value, "tenantId and taskId")


class ForwardedTask(BaseModel):
    """StepDispatcher's input for a task handed to it: `{"forwardedTask": {...}}`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    forwarded_task: HandedTask = Field(alias="forwardedTask")


class ScheduledInput(BaseModel):
    """A schedule tick or a nudge: nothing in it is needed, anything is accepted."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str | None = None
    source: str | None = None
    detail_type: str | None = Field(default=None, alias="detail-type")


class CustomResourceEvent(BaseModel):
    """A CloudFormation custom resource request."""

    model_config = ConfigDict(extra="allow")

    RequestType: Literal["Create", "Update", "Delete"]
    ResponseURL: str = Field(pattern=r"^https?://")
    StackId: str
    RequestId: str
    LogicalResourceId: str
    PhysicalResourceId: str | None = None
    ResourceProperties: dict[str, Any] = Field(default_factory=dict)
