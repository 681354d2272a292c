"""Kept function versions in AWS (definition/hosts.py): what a version registers when its
container starts, how a run's work is handed to the version that has its definition,
and the pruning of versions nothing references any more (`wfr versions prune`).

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
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from ..engine.resume import ResumeRequestItem, ResumeResult
from ..engine.tasks import TaskAttemptResult
from ..errors import ForwardFailed, HostGone
from ..ports import FunctionInvoker, ResumeRequest
from ..store import ClaimedTask, Store
from .ports import resume_message

log = logging.getLogger("workflow_runner.aws")

# The alias every function is invoked through (template.yaml: AutoPublishAlias).
LIVE_ALIAS = "live"
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


# --- pruning --------------------------------------------------------------------------


@dataclass
class PruneReport:
    """What `prune_versions` did (or would do, `dry_run`), version by version: `deleted`,
    `kept` (ARN -> why) and `failed` (ARN -> the error)."""

    dry_run: bool
    deleted: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "deleted": self.deleted,
            "kept": self.kept,
            "failed": self.failed,
        }


def prune_versions(
    client: Any, store: Store, dry_run: bool = False, alias: str = LIVE_ALIAS
) -> PruneReport:
    """Delete the versions of the functions that registered kept code (ResumeRun and
    StepDispatcher) that no unsettled run needs.

    A version is kept when `alias` points to it (with its canary weights), when it is
    newer than that (a deploy in progress), or when it is the newest version that has
    the definition of an unsettled run which the alias's version does not have. Every
    other published version is deleted (`$LATEST` is never a candidate), with what it
    registered. Read first, delete after: a run that starts meanwhile starts on the
    alias's version, which is kept.

    Args:
        client: a boto3 Lambda client of the functions' region (functions elsewhere are
            reported failed, not touched).
        store: the stack's database (what is registered, which runs are unsettled).
        dry_run: report what would be deleted, delete nothing.
        alias: the alias traffic goes through.
    """
    report = PruneReport(dry_run)
    rows = store.hosts.all()
    needed = store.hosts.unsettled_definitions()
    hosted: dict[str, set[tuple[str, str]]] = {}
    for row in rows:
        hosted.setdefault(row.function_arn, set()).add((row.workflow_name, row.fingerprint))
    functions = sorted({arn.rsplit(":", 1)[0] for arn in hosted})
    for function in functions:
        region, name = function.split(":")[3], function.split(":")[6]
        if region != client.meta.region_name:
            report.failed[function] = f"in region {region}: prune there (--region {region})"
            continue
        live = _alias_versions(client, name, alias)
        versions = _published_versions(client, name)
        newest_live = max((int(v) for v in live if v.isdigit()), default=0)
        live_has: set[tuple[str, str]] = set()
        for version in live:
            live_has |= hosted.get(f"{function}:{version}", set())
        keep: dict[str, str] = {}
        for workflow, fingerprint in sorted(needed - live_has):
            having = [
                v for v in versions if (workflow, fingerprint) in hosted.get(f"{function}:{v}", ())
            ]
            if having:
                newest = max(having, key=int)
                why = keep.get(newest, "unsettled runs of")
                keep[newest] = f"{why} {workflow} ({fingerprint[:12]}…)"
        for version in versions:
            arn = f"{function}:{version}"
            if version in live:
                report.kept[arn] = f"the {alias} alias points to it"
            elif int(version) > newest_live:
                report.kept[arn] = f"newer than the {alias} alias's version (a deploy in progress)"
            elif version in keep:
                report.kept[arn] = keep[version]
            elif dry_run:
                report.deleted.append(arn)
            else:
                _delete(client, store, name, arn, report)
    return report


def _alias_versions(client: Any, name: str, alias: str) -> set[str]:
    """The versions an alias sends traffic to (its version and canary weights)."""
    found = client.get_alias(FunctionName=name, Name=alias)
    weights = (found.get("RoutingConfig") or {}).get("AdditionalVersionWeights") or {}
    return {str(found["FunctionVersion"]), *map(str, weights)}


def _published_versions(client: Any, name: str) -> list[str]:
    versions: list[str] = []
    for page in client.get_paginator("list_versions_by_function").paginate(FunctionName=name):
        versions += [str(v["Version"]) for v in page["Versions"] if str(v["Version"]).isdigit()]
    return sorted(versions, key=int)


def _delete(client: Any, store: Store, name: str, arn: str, report: PruneReport) -> None:
    try:
        client.delete_function(FunctionName=name, Qualifier=arn.rsplit(":", 1)[1])
    except Exception as error:
        if _error_code(error) != "ResourceNotFoundException":
            report.failed[arn] = f"{_error_code(error) or type(error).__name__}: {error}"
            return
    store.hosts.forget(arn)
    report.deleted.append(arn)
