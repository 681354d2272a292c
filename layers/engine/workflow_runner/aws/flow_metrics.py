"""Flow control's metrics, per workflow (dimension `workflow`, each its own EMF record
so the functions' other metrics keep their dimensions):

- `LimitWaitSeconds`: how long work waited for a limit before it ran (a run held before
  its first step, a resume or a task attempt queued for a slot, an attempt's throttle
  turn), one value per piece of work;
- `LimitQueued`: work waiting for a limit now (queued for a slot, or holding a throttle
  turn still ahead), emitted by DueScan every minute.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from ..flow.views import turns_ahead
from ..store import Store
from .observability import NAMESPACE, SERVICE


def _emit(name: str, workflow: str, value: float, unit: MetricUnit) -> None:
    if os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() == "true":
        return  # the local runtime (wfr dev, the test kit) keeps no metrics
    with single_metric(
        name=name,
        unit=unit,
        value=value,
        namespace=NAMESPACE,
        default_dimensions={"service": SERVICE},
    ) as metric:
        metric.add_dimension(name="workflow", value=workflow)


def report_limit_waits(store: Store) -> int:
    """Emit the waits this connection's work recorded since the last call; how many."""
    waits, store.flow.waits = store.flow.waits, []
    for workflow, seconds in waits:
        _emit("LimitWaitSeconds", workflow, seconds, MetricUnit.Seconds)
    return len(waits)


def report_limits_queued(store: Store, now: datetime) -> dict[str, int]:
    """Emit the work each workflow has waiting for a limit now; the counts."""
    queued: dict[str, int] = defaultdict(int)
    for workflow, count, _ in store.flow.queued_by_workflow():
        queued[workflow] += count
    for row in store.flow.limits(now, limit=10_000):
        if row.kind == "throttle":
            queued[row.workflow_name] += turns_ahead(row, now)
    for workflow, count in sorted(queued.items()):
        _emit("LimitQueued", workflow, count, MetricUnit.Count)
    return dict(queued)
