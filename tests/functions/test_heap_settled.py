"""A warm Lambda container settles its heap once, after its first engine call
(workflow_runner.heap): later full collections walk only what requests create.

Runs the handler in a child interpreter: freezing is process-wide."""

from __future__ import annotations

from tests.support import child_json

_CHILD = """
import gc, json, os, sys
os.environ.update(POWERTOOLS_TRACE_DISABLED="true", POWERTOOLS_SERVICE_NAME="workflow-runner",
                  AWS_DEFAULT_REGION="eu-central-1")
from datetime import UTC, datetime
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.aws.template import load_handlers
from workflow_runner.clock import ManualClock
from workflow_runner.ports import set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import connect
from tests.functions.helpers import TEMPLATE, load_event

url = sys.argv[1]
handler = load_handlers(TEMPLATE)["PendingProjectionFunction"]
set_runtime(build_inprocess_runtime(
    connect(url), ManualClock(datetime(2026, 1, 1, tzinfo=UTC)),
    settings=Settings(database_url=url, mail_sender="noreply@example.com")))
nudge = load_event("pending-projection-nudge.json")
seen = {"before": gc.get_freeze_count()}
handler(nudge, FakeLambdaContext())
seen["after_first"] = gc.get_freeze_count()
kept = [[i] for i in range(2000)]  # a second settle would freeze these
handler(nudge, FakeLambdaContext())
seen["after_second"] = gc.get_freeze_count()
seen["walked"] = len(gc.get_objects())
print(json.dumps(seen))
"""


def test_first_engine_call_settles_the_heap_and_later_ones_do_not(db_url: str) -> None:
    seen = child_json(_CHILD, db_url)
    assert seen["before"] == 0
    # The imports (engine, Powertools, boto3, pydantic) and the runtime left the walks.
    assert seen["after_first"] > 20_000
    assert seen["walked"] < seen["after_first"] // 5
    # Once per container (frozen objects still go when their last reference does).
    assert seen["after_second"] <= seen["after_first"]
