"""PendingProjection publishes how far it is behind (issue 11, item 2): the alarm on
`ProjectionLagSeconds` fires when an engine transaction holds the projection back."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from workflow_runner import ManualClock
from workflow_runner.aws.inprocess import FakeLambdaContext
from workflow_runner.aws.template import Handler, load_template
from workflow_runner.ports import Runtime, set_runtime
from workflow_runner.store import Store, connect

from tests.functions.helpers import TEMPLATE, Emitted, load_event

Handlers = dict[str, Handler]


def _invoke(handlers: Handlers, name: str, event: Any) -> Any:
    return handlers[name](event, FakeLambdaContext())


def test_pending_projection_reports_its_lag_in_events_and_seconds(
    handlers: Handlers,
    runtime: Runtime,
    store: Store,
    clock: ManualClock,
    db_url: str,
    emitted: Any,
) -> None:
    stuck = connect(db_url)  # an engine session stuck in a transaction that wrote
    stuck.conn.execute("BEGIN")
    stuck.inbox.register_tenant("33333333-3333-4333-8333-333333333333", clock.now())
    _invoke(
        handlers, "TriggerProjectionFunction", load_event("trigger-projection-user-signed-up.json")
    )
    clock.advance(timedelta(seconds=30))
    emitted()
    held = _invoke(
        handlers, "PendingProjectionFunction", load_event("pending-projection-nudge.json")
    )
    out = emitted()
    assert held["applied"] == 0
    assert (held["lagEvents"], held["lagSeconds"]) == (2, 30.0)
    assert out.metric("ProjectionLagEvents") == 2
    assert out.metric("ProjectionLagSeconds") == 30.0

    stuck.conn.execute("ROLLBACK")
    stuck.close()
    caught_up = _invoke(
        handlers, "PendingProjectionFunction", load_event("pending-projection-nudge.json")
    )
    out = emitted()
    assert (caught_up["applied"], caught_up["lagEvents"], caught_up["lagSeconds"]) == (3, 0, 0.0)
    assert out.metric("ProjectionLagSeconds") == 0.0 and out.metric("ProjectionLagEvents") == 0


def _lag_datapoints(out: Emitted, alarm: dict[str, Any]) -> list[float]:
    """The values of what an alarm watches among the emitted EMF blobs: same namespace,
    metric, dimension set and dimension values."""
    found = []
    dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
    for blob in out.metrics:
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        names = {m["Name"]: m.get("Unit") for m in directive["Metrics"]}
        if directive["Namespace"] != alarm["Namespace"] or alarm["MetricName"] not in names:
            continue
        assert names[alarm["MetricName"]] == "Seconds"
        assert directive["Dimensions"] == [sorted(dimensions)]
        assert {k: blob[k] for k in dimensions} == dimensions
        value = blob[alarm["MetricName"]]
        found += value if isinstance(value, list) else [value]
    return found


def test_the_lag_alarm_of_the_template_fires_on_what_pending_projection_emits(
    handlers: Handlers,
    runtime: Runtime,
    store: Store,
    clock: ManualClock,
    db_url: str,
    emitted: Any,
) -> None:
    alarm = load_template(TEMPLATE)["Resources"]["ProjectionLagAlarm"]["Properties"]
    stuck = connect(db_url)  # an engine transaction that wrote, left open (a frozen function)
    stuck.conn.execute("BEGIN")
    stuck.inbox.register_tenant("33333333-3333-4333-8333-333333333333", clock.now())
    _invoke(
        handlers, "TriggerProjectionFunction", load_event("trigger-projection-user-signed-up.json")
    )
    clock.advance(timedelta(seconds=alarm["Threshold"] + 60))
    emitted()
    _invoke(handlers, "PendingProjectionFunction", load_event("pending-projection-schedule.json"))
    (behind,) = _lag_datapoints(emitted(), alarm)
    assert behind > alarm["Threshold"]  # GreaterThanThreshold: a breaching datapoint

    stuck.conn.execute("ROLLBACK")
    stuck.close()
    _invoke(handlers, "PendingProjectionFunction", load_event("pending-projection-schedule.json"))
    (caught_up,) = _lag_datapoints(emitted(), alarm)
    assert caught_up == 0.0


def test_pending_projection_spaces_a_warm_containers_catch_ups_by_the_linger(
    handlers: Handlers, runtime: Runtime
) -> None:
    """PROJECTION_LINGER_MS: a nudge right after a catch-up waits out the rest of the
    linger (the events meanwhile go in one catch-up); with 0 it catches up at once."""
    assert runtime.settings is not None
    nudge = load_event("pending-projection-nudge.json")
    for linger_ms in (400, 0):
        settings = runtime.settings.model_copy(update={"projection_linger_ms": linger_ms})
        set_runtime(replace(runtime, settings=settings))
        _invoke(handlers, "PendingProjectionFunction", nudge)
        began = time.monotonic()
        second = _invoke(handlers, "PendingProjectionFunction", nudge)
        elapsed = time.monotonic() - began
        if linger_ms:
            assert second["lingeredMs"] > 200
            assert elapsed >= second["lingeredMs"] / 1000
        else:
            assert second["lingeredMs"] == 0
