"""The console's run page says when a run polls a condition: how many checks ran, when
the next one is due and when it gives up; its graph draws the step as a loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from console_support import console, send
from workflow_runner import Continue, Event, define_workflow, on_event
from workflow_runner.definition import default_registry
from workflow_runner.store import Store

from tests.support import TENANT_A


def _never(ctx: Any, state: Any) -> Any:
    return Continue({"polls": 1})


POLL = define_workflow(
    name="console-poll",
    trigger=on_event("console-poll.requested"),
    idempotency_key=Event.payload["id"],
    steps=lambda s: [
        s.wait_for_condition("job", _never, every="PT5M", max_attempts=4, timeout="PT1H"),
    ],
    register=False,
)


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    default_registry().register(POLL)
    yield
    default_registry().unregister(POLL.name)


def test_a_polling_run_says_which_check_ran_and_when_the_next_is(db_url: str, store: Store) -> None:
    run_id = send(store, "console-poll.requested", {"id": "p-1"})

    page = console(db_url).get(f"/runs/{run_id}", tenant=TENANT_A)

    assert page.status == 200
    assert (
        "Waiting at step 0 for condition &#x27;job&#x27;: not met on check 1 of 4, next check"
        in page.text
    )
    assert "gives up" in page.text
    assert "condition &#x27;job&#x27; not met on check 1 of 4, next check at" in page.text
    assert 'class="edge loop"' in page.text  # the graph draws the step as a loop
    assert "not yet: wait," in page.text
