"""Flow control's metrics, per workflow: LimitWaitSeconds as held work runs (ResumeRun)
and LimitQueued every minute (DueScan)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta

from workflow_runner.aws.inprocess import FakeLambdaContext, InMemoryResumeQueue
from workflow_runner.aws.template import Handler
from workflow_runner.clock import ManualClock
from workflow_runner.engine.projection import project_pending
from workflow_runner.ports import Runtime, set_runtime
from workflow_runner.store import Store

from tests.flow.flows import REGISTRY, T0, put
from tests.functions.helpers import Emitted


def _by_workflow(emitted: Emitted, name: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for blob in emitted.metrics:
        if name in blob:
            value = blob[name]
            total = sum(value) if isinstance(value, list) else value
            found[blob["workflow"]] = found.get(blob["workflow"], 0.0) + float(total)
            assert blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service", "workflow"]]
    return found


def test_held_starts_are_counted_queued_then_their_wait_when_they_run(
    handlers: dict[str, Handler],
    runtime: Runtime,
    store: Store,
    clock: ManualClock,
    context: FakeLambdaContext,
    emitted: Callable[[], Emitted],
) -> None:
    rt = dataclasses.replace(runtime, registry=REGISTRY)
    set_runtime(rt)
    clock.set(T0)
    for n in range(4):  # 10 a minute: three wait for their turns (6, 12, 18 s)
        put(store, "throttled", n)
    project_pending(store, T0)
    emitted()

    handlers["DueScanFunction"]({"source": "aws.events"}, context)
    assert _by_workflow(emitted(), "LimitQueued") == {"throttled": 3.0}

    clock.set(T0 + timedelta(seconds=20))
    queue = rt.resume_queue
    assert isinstance(queue, InMemoryResumeQueue)
    handlers["DueScanFunction"]({"source": "aws.events"}, context)
    emitted()
    handlers["ResumeRunFunction"](queue.sqs_event(queue.receive()), context)
    waits = _by_workflow(emitted(), "LimitWaitSeconds")
    assert waits == {"throttled": 60.0}  # three runs, 20 s each since their trigger
