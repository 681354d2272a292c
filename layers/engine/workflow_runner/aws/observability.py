"""Operational signals of the functions beyond their business metrics: heartbeats of the
scheduled functions, and X-Ray annotations that make a tenant's or a run's traces
searchable (``annotation.tenant_id = "..." AND annotation.run_id = "..."``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from ..errors import InvalidInput
from ..json_input import parse_json
from .lambda_support import MAX_INPUT_BYTES, tracer

NAMESPACE = "WorkflowRunner"
SERVICE = "workflow-runner"


def heartbeat(function: str) -> None:
    """Count one successful run of a scheduled function: metric ``Heartbeat`` with
    dimensions ``service`` and ``function``. Its alarm treats missing data as breaching,
    so a function that raises, times out or stops being invoked pages.

    Emitted as its own EMF record, so the extra dimension never changes the dimensions of
    the function's other metrics (their alarms match on ``service`` alone). Not emitted
    when POWERTOOLS_METRICS_DISABLED is true: single_metric, unlike Metrics, ignores it,
    and the local runtime sets it so that no EMF record reaches the developer's terminal.
    """
    if os.environ.get("POWERTOOLS_METRICS_DISABLED", "").strip().lower() == "true":
        return
    with single_metric(
        name="Heartbeat",
        unit=MetricUnit.Count,
        value=1,
        namespace=NAMESPACE,
        default_dimensions={"service": SERVICE},
    ) as metric:
        metric.add_dimension(name="function", value=function)


@contextmanager
def traced(name: str) -> Iterator[None]:
    """A subsegment for one unit of work of a batch, so each can carry its own
    annotations (annotations are single-valued per segment); nothing when tracing is off."""
    if tracer.disabled:
        yield
        return
    with tracer.provider.in_subsegment(name=name):
        yield


def annotate(**keys: str | None) -> None:
    """Put X-Ray annotations (``tenant_id``, ``run_id``, ``event_id``) on the current
    segment or subsegment; None values are skipped."""
    for key, value in keys.items():
        if value is not None:
            tracer.put_annotation(key=key, value=value)


def annotate_resume_batch(event: Any) -> None:
    """One subsegment per resume request of an SQS batch, annotated with its tenant and
    run (the batch itself runs in one transaction, so these mark membership, not time).
    Bodies that are not resume requests are left to the handler's validation."""
    if tracer.disabled or not isinstance(event, Mapping):
        return
    for record in event.get("Records") or []:
        try:
            body = parse_json(record["body"], "resume message", max_bytes=MAX_INPUT_BYTES)
        except (KeyError, TypeError, InvalidInput):
            continue
        if isinstance(body, dict):
            with traced("## resume request"):
                annotate(tenant_id=_text(body.get("tenantId")), run_id=_text(body.get("runId")))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
