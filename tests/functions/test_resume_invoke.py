"""ResumeRun's direct invoke (console, CLI) is strict: no coerced `force`, a wrong
`stepIndex` is refused naming the step the run waits at, and a resume that is not due
answers when it will be, without queueing anything (issue 11, item 8)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from workflow_runner import ManualClock
from workflow_runner.aws.inprocess import FakeLambdaContext
from workflow_runner.aws.template import Handler
from workflow_runner.errors import InvalidInput
from workflow_runner.ports import Runtime
from workflow_runner.store import Store

from tests.functions.helpers import TENANT, Emitted, load_event

ONBOARDING_RUN = "20674095-dda5-5811-b700-b57eb304d119"
Handlers = dict[str, Handler]


def _invoke(handlers: Handlers, name: str, event: Any) -> Any:
    return handlers[name](event, FakeLambdaContext())


def _waiting_onboarding(handlers: Handlers) -> None:
    """user-onboarding waits a day at step 1."""
    _invoke(
        handlers, "TriggerProjectionFunction", load_event("trigger-projection-user-signed-up.json")
    )


def _events(store: Store) -> int:
    return len(store.streams.load(TENANT, ONBOARDING_RUN))


@pytest.mark.parametrize("force", ["yes", "true", 1, "1", None])
def test_a_force_that_is_not_a_json_boolean_is_refused_and_nothing_moves(
    handlers: Handlers, runtime: Runtime, store: Store, emitted: Any, force: Any
) -> None:
    _waiting_onboarding(handlers)
    before = _events(store)
    emitted()
    request = {"tenantId": TENANT, "runId": ONBOARDING_RUN, "stepIndex": 1, "force": force}
    with pytest.raises(InvalidInput, match="force"):
        _invoke(handlers, "ResumeRunFunction", request)
    assert _events(store) == before
    out: Emitted = emitted()
    assert out.metric("InvalidInput") == 1 and out.metric("RunsResumed") == 0


def test_a_wrong_step_index_names_the_step_the_run_waits_at(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock, emitted: Any
) -> None:
    _waiting_onboarding(handlers)
    clock.advance(timedelta(days=2))
    before = _events(store)
    request = {"tenantId": TENANT, "runId": ONBOARDING_RUN, "stepIndex": 4, "force": True}
    with pytest.raises(InvalidInput, match=r"waits at step 1\b.*not at step 4"):
        _invoke(handlers, "ResumeRunFunction", request)
    assert _events(store) == before
    assert runtime.resume_queue.sent == []  # type: ignore[attr-defined]
    assert emitted().metric("InvalidInput") == 1


def test_a_direct_invoke_that_is_not_due_says_when_and_queues_nothing(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    _waiting_onboarding(handlers)
    clock.advance(timedelta(hours=2))
    before = _events(store)
    answer = _invoke(
        handlers, "ResumeRunFunction", load_event("resume-run-force.json") | {"force": False}
    )
    assert answer["outcome"] == "not-due"
    assert answer["wakeAt"] == "2026-01-06T09:00:00+00:00"
    assert answer["dueInSeconds"] == 22 * 3600
    assert runtime.resume_queue.sent == []  # type: ignore[attr-defined]
    assert _events(store) == before


def test_an_early_sqs_message_is_still_put_back_with_its_delay(
    handlers: Handlers, runtime: Runtime, store: Store, clock: ManualClock
) -> None:
    """The queue's own early arrivals keep being requeued: only the direct invoke changed."""
    _waiting_onboarding(handlers)
    clock.advance(timedelta(days=1, seconds=-30))
    event = load_event("resume-run-sqs.json")
    event["Records"] = event["Records"][:1]
    assert _invoke(handlers, "ResumeRunFunction", event) == {"batchItemFailures": []}
    (request,) = runtime.resume_queue.sent  # type: ignore[attr-defined]
    assert (request.run_id, request.delay_seconds) == (ONBOARDING_RUN, 30)
