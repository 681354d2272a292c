"""Kept function versions in AWS (definition/hosts.py): what a version registers when its
container starts, and how a run's work is handed to the version that has its definition.

Every deploy publishes a version of each function and moves its `live` alias to it
(template.yaml: AutoPublishAlias); older versions stay. ResumeRun and StepDispatcher
register the definitions their code has under their qualified ARN (`$LATEST`, which is
not a published version, registers nothing).

The payloads between versions are a contract (an older version answers a newer one):

- a resume handed on: the resume request `{"tenantId", "runId", "stepIndex", "force"?}`
  plus `"forwardedFrom": <the caller's qualified ARN>`, answered with the direct invoke's
  answer plus `"waitingAt"`; a request that carries `forwardedFrom` is never handed on;
- a task handed on: `{"forwardedTask": {"tenantId", "taskId", "attempt", "lostAttempt",
  "forwardedFrom"}}`, answered `{"task": <TaskAttemptResult as JSON> | null}` (null: the
  claim no longer held there).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from ..engine.resume import ResumeRequestItem, ResumeResult
from ..engine.tasks import TaskAttemptResult
from ..errors import ForwardFailed, HostGone
from ..ports import FunctionInvoker, ResumeRequest
from ..store import ClaimedTask
from .ports import resume_message

log = logging.getLogger("workflow_runner.aws")

# A handed-on call waits this long for its answer: longer than either function may run
# (ResumeRun 30 s, StepDispatcher 60 s), so a read timeout means the other side died.
FORWARD_READ_TIMEOUT_S = 120

_own_arn: str | None = None


def qualified_arn(invoked_function_arn: str, version: str) -> str | None:
    """The ARN of the function version a container runs, from the ARN it was invoked
    by (unqualified, or with an alias or version) and its version; None for `$LATEST`."""
    if not version or version == "$LATEST":
        return None
    parts = invoked_function_arn.split(":")
    return ":".join([*parts[:7], version])


def remember_own_arn(arn: str | None) -> None:
    """The qualified ARN of the version this container runs (set at its first call)."""
    global _own_arn
    _own_arn = arn


def own_arn() -> str:
    """This container's qualified ARN, or "unknown" before its first call."""
    return _own_arn or "unknown"


def _error_code(error: Exception) -> str | None:
    code = getattr(error, "response", {}).get("Error", {}).get("Code")
    return str(code) if code else None


class LambdaInvoker:
    """FunctionInvoker with Lambda: a synchronous invoke (RequestResponse) of a qualified
    function ARN. The client must not retry (a retried task attempt would run twice
    under one lease; a resume is retried by its queue instead) and must wait longer than
    the function may run (build_aws_runtime: FORWARD_READ_TIMEOUT_S, one attempt).

    Args:
        client: a boto3 Lambda client.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def invoke(self, function_arn: str, payload: dict[str, Any]) -> Any:
        try:
            reply = self._client.invoke(
                FunctionName=function_arn,
                InvocationType="RequestResponse",
                Payload=json.dumps(payload, separators=(",", ":")).encode(),
            )
        except Exception as error:
            if _error_code(error) == "ResourceNotFoundException":
                raise HostGone(function_arn) from error
            raise ForwardFailed(f"{function_arn} could not be invoked: {error!r}") from error
        body = json.loads(reply["Payload"].read() or b"null")
        if reply.get("FunctionError"):
            kind = body.get("errorType") if isinstance(body, dict) else None
            raise ForwardFailed(f"{function_arn} raised {kind or reply['FunctionError']}")
        return body


class KeptVersionForwarder:
    """Hands a run's work to the kept version that has its definition: a resume to its
    ResumeRun (engine/handing.py's ResumeForwarder), a claimed task to its
    StepDispatcher (engine/tasks.py's TaskForwarder), in the payloads of this module's
    docstring.

    Args:
        invoker: the runtime's FunctionInvoker (LambdaInvoker in AWS).
        caller: this version's qualified ARN (sent as `forwardedFrom`).
    """

    def __init__(self, invoker: FunctionInvoker, caller: Callable[[], str] = own_arn) -> None:
        self._invoker = invoker
        self._caller = caller

    def resume(self, host: str, request: ResumeRequestItem) -> ResumeResult:
        body = resume_message(
            ResumeRequest(
                request.tenant_id, request.run_id, request.step_index, force=request.force
            )
        )
        body["forwardedFrom"] = self._caller()
        return resume_result_from_json(self._invoker.invoke(host, body))

    def run_task(self, host: str, task: ClaimedTask) -> TaskAttemptResult | None:
        answer = self._invoker.invoke(host, forwarded_task_payload(task, self._caller()))
        found = answer.get("task") if isinstance(answer, dict) else None
        return TaskAttemptResult(**found) if isinstance(found, dict) else None


def forwarded_task_payload(task: ClaimedTask, caller: str) -> dict[str, Any]:
    """StepDispatcher's input for an attempt handed to it (see the module's docstring)."""
    return {
        "forwardedTask": {
            "tenantId": task.tenant_id,
            "taskId": task.task_id,
            "attempt": task.attempt,
            "lostAttempt": task.lost_attempt,
            "forwardedFrom": caller,
        }
    }


def task_result_json(result: TaskAttemptResult | None) -> dict[str, Any]:
    """StepDispatcher's answer to a task handed to it."""
    return {"task": None if result is None else asdict(result)}


def resume_result_from_json(body: Any) -> ResumeResult:
    """A kept ResumeRun version's answer (its direct invoke's, plus `waitingAt`).

    Raises:
        ForwardFailed: the answer is not one.
    """

    def instant(value: Any) -> datetime | None:
        return datetime.fromisoformat(value) if isinstance(value, str) else None

    try:
        return ResumeResult(
            outcome=body["outcome"],
            tenant_id=body["tenantId"],
            run_id=body["runId"],
            step_index=int(body["stepIndex"]),
            wake_at=instant(body.get("wakeAt")),
            suspended_at=body.get("suspendedAt"),
            reason=body.get("reason"),
            resumed_wake_at=instant(body.get("nextWakeAt")),
            waiting_at=body.get("waitingAt"),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ForwardFailed(f"not a resume answer: {error!r}") from error

