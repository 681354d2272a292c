"""Failing, beating and created callbacks without a database: the steps in a pass, their
definition checks and shapes, the stored shapes of their facts, the fold, and how a
person sees them (timeline, graph, console drawing)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import DomainEvent, define_workflow, on_event
from workflow_runner import stream as ev
from workflow_runner.callback_tokens import (
    callback_links,
    created_mint,
    derived_token,
    token_hash,
    tokens_in,
)
from workflow_runner.console.svg import to_svg
from workflow_runner.definition.checks import DefinitionProblems
from workflow_runner.definition.dsl import WorkflowDefinition, has_callback_wait
from workflow_runner.definition.fingerprint import compute_fingerprint
from workflow_runner.definition.shape import first_difference, shape_of
from workflow_runner.graph import flowchart, mark_run
from workflow_runner.graph_render import to_mermaid
from workflow_runner.interpreter import Interpreter
from workflow_runner.pass_result import KnownCallback
from workflow_runner.stream import RecordedFact, fold_run
from workflow_runner.timeline import describe_event

from tests.unit.test_callback_tokens_and_facts import _started, _stored

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
EVENT = DomainEvent(id="e1", type="demo.fired", payload={}, tenant_id="t")
SECRET = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"
HASH = "b" * 64


def _wf(steps: Any, name: str = "cb") -> WorkflowDefinition:
    return define_workflow(name=name, trigger=on_event("demo.fired"), steps=steps, register=False)


def _run(wf: WorkflowDefinition, path: Any = None, **kw: Any) -> Any:
    kw.setdefault("callback_secret", SECRET)
    kw.setdefault("dispatch_seed", "t|1")
    return Interpreter(wf, EVENT, "run-1", kw.pop("now", NOW), **kw).run(path)


def _known(name: str = "ok", **kw: Any) -> KnownCallback:
    mint = created_mint("t|1", 0)
    fields: dict[str, Any] = {
        "name": name,
        "token_hash": token_hash(derived_token(SECRET, mint)),
        "mint": mint,
        "timeout_at": NOW + timedelta(days=1),
        "heartbeat_seconds": None,
        "last_beat": NOW - timedelta(hours=1),
    }
    return KnownCallback(**{**fields, **kw})


# --- create_callback and ctx.callbacks ---------------------------------------------------------


def test_a_created_callback_s_token_reaches_the_steps_after_it_and_is_stable() -> None:
    wf = _wf(
        lambda s: [
            s.create_callback("approve", timeout="P2D", heartbeat="PT10M"),
            s.compute("link", lambda ctx: ctx.callbacks["approve"].url),
            s.wait(for_="PT1H"),
        ]
    )
    with callback_links("https://cb.example.com"):
        first, again = _run(wf), _run(wf)
        other = _run(wf, dispatch_seed="t|9")
    assert first.outcome == "suspended"  # no callback_not_reached: it is no wait's token
    (made,) = first.created_callbacks
    (token,) = tokens_in(first.results["link"])
    assert first.results["link"] == f"https://cb.example.com/{token}"
    assert (made.name, made.path, made.token_hash, made.mint) == (
        "approve",
        [{"i": 0}],
        token_hash(token),
        "t|1|create|0",
    )
    assert (made.timeout_at, made.heartbeat_seconds) == (NOW + timedelta(days=2), 600)
    assert again.created_callbacks == first.created_callbacks  # a repeated pass
    assert other.created_callbacks[0].token_hash != made.token_hash  # another pass


def test_a_later_pass_derives_the_same_token_from_the_stored_mint() -> None:
    wf = _wf(lambda s: [s.create_callback("ok"), s.wait(for_="PT1H"), s.return_(_link)])
    known = _known()
    resumed = _run(wf, [{"i": 1}], dispatch_seed="t|3", known_callbacks=lambda: [known])
    assert token_hash(resumed.return_value) == known.token_hash


def _link(ctx: Any) -> Any:
    return ctx.callbacks["ok"].token


def test_making_a_name_twice_in_a_pass_supersedes_the_first() -> None:
    wf = _wf(lambda s: [s.create_callback("ok"), s.create_callback("ok"), s.return_(_link)])
    result = _run(wf)
    first, second = result.created_callbacks
    assert (first.superseded, second.superseded) == (True, False)
    assert token_hash(result.return_value) == second.token_hash != first.token_hash


@pytest.mark.parametrize(
    ("steps", "reason", "error"),
    [
        (lambda s: [s.return_(_link)], "callback_not_created", "CallbackNotCreated"),
        (
            lambda s: [
                s.branch(if_=False, on_true=[s.create_callback("ok")]),
                s.await_callback("ok"),
            ],
            "callback_not_created",
            "CallbackNotCreated",
        ),
    ],
)
def test_reading_or_awaiting_a_callback_no_step_made_fails_the_run(
    steps: Any, reason: str, error: str
) -> None:
    result = _run(_wf(steps))
    assert (result.outcome, result.reason) == ("failed", reason)
    assert result.error == f"workflow step failed ({error})"


def test_a_run_without_a_secret_cannot_create_a_callback() -> None:
    result = _run(_wf(lambda s: [s.create_callback("ok")]), callback_secret=None)
    assert (result.outcome, result.reason) == ("failed", "callback_secret_missing")
    assert result.created_callbacks == []


def test_workflows_that_create_callbacks_give_their_runs_a_secret() -> None:
    assert has_callback_wait(_wf(lambda s: [s.create_callback("ok")]).steps)
    # What a start asks (kept per definition, walked once).
    creates = _wf(lambda s: [s.create_callback("ok")])
    assert creates.takes_callbacks and creates.takes_callbacks
    assert not _wf(lambda s: [s.wait(for_="PT1H")]).takes_callbacks
    # Kept on the instance, it must not ride along into a copy of its fields.
    copied = dataclasses.replace(creates, description="copied")
    assert copied.takes_callbacks and copied.description == "copied"


# --- await_callback in a pass ----------------------------------------------------------------


def _awaiting(catch: bool = False) -> WorkflowDefinition:
    return _wf(
        lambda s: [
            s.create_callback("ok", heartbeat="PT10M"),
            s.wait(for_="PT1H"),
            s.await_callback("ok", result_key="answer", catch=catch),
            s.return_(lambda ctx: ctx.steps["answer"]),
        ]
    )


def test_an_await_of_an_open_callback_suspends_until_its_deadline() -> None:
    known = _known(heartbeat_seconds=600, last_beat=NOW - timedelta(minutes=4))
    result = _run(_awaiting(), [{"i": 1}], known_callbacks=lambda: [known])
    assert result.outcome == "suspended"
    waits = result.suspension
    assert (waits.kind, waits.path, waits.wake_at) == (
        "waiting-for-callback",
        [{"i": 2}],
        known.timeout_at,
    )
    assert (waits.callback.name, waits.callback.token_hash, waits.callback.result_key) == (
        "ok",
        known.token_hash,
        "answer",
    )
    assert waits.callback.heartbeat_at == NOW + timedelta(minutes=6)


def test_an_await_takes_an_answer_that_came_before_at_once() -> None:
    known = _known(event_id="ev-1", answer={"yes": 1})
    result = _run(_awaiting(), [{"i": 1}], known_callbacks=lambda: [known])
    assert (result.outcome, result.return_value) == ("completed", {"yes": 1})
    assert result.awaited_refs_delta() == {"answer": "ev-1"}  # a reference, not a copy
    assert "answer" not in result.results_delta()


@pytest.mark.parametrize("catch", [False, True])
def test_an_await_of_a_callback_that_failed_fails_or_is_caught(catch: bool) -> None:
    answer = {"failed": True, "error": "Declined"}
    known = _known(event_id="ev-1", error="Declined", answer=answer)
    result = _run(_awaiting(catch), [{"i": 1}], known_callbacks=lambda: [known])
    if catch:
        assert (result.outcome, result.return_value) == ("completed", answer)
    else:
        assert (result.outcome, result.reason, result.error) == (
            "failed",
            "callback_failed",
            "workflow step failed (Declined)",
        )


@pytest.mark.parametrize(
    ("kw", "timer"),
    [
        ({"timeout_at": NOW}, "timeout"),
        ({"heartbeat_seconds": 600, "last_beat": NOW - timedelta(minutes=10)}, "heartbeat_timeout"),
    ],
)
def test_an_await_of_an_expired_callback_gets_none_and_closes_it(kw: Any, timer: str) -> None:
    known = _known(**kw)
    result = _run(_awaiting(), [{"i": 1}], known_callbacks=lambda: [known])
    assert (result.outcome, result.return_value) == ("completed", None)
    assert result.closed_callbacks == [(known.token_hash, timer)]
    assert result.awaited_refs_delta() == {"answer": None}


def test_an_await_of_a_closed_callback_gets_none_and_closes_nothing() -> None:
    known = _known(closed=True)
    result = _run(_awaiting(), [{"i": 1}], known_callbacks=lambda: [known])
    assert (result.return_value, result.closed_callbacks) == (None, [])


def test_an_answer_the_resume_seeds_is_taken_and_a_failure_fails_unless_caught() -> None:
    for catch, outcome in ((False, "failed"), (True, "completed")):
        resumed = _run(
            _awaiting(catch),
            [{"i": 2}],
            results={"answer": {"failed": True, "error": "Declined"}},
            callback_error="Declined",
        )
        assert resumed.outcome == outcome
    plain = _wf(lambda s: [s.wait_for_callback("a"), s.return_(lambda ctx: ctx.steps["a"])])
    resumed = _run(plain, [{"i": 0}], results={"a": None})
    assert (resumed.outcome, resumed.return_value) == ("completed", None)


def test_a_heartbeat_wait_carries_its_interval_and_first_deadline() -> None:
    result = _run(_wf(lambda s: [s.wait_for_callback("a", timeout="P1D", heartbeat="PT5M")]))
    callback = result.suspension.callback
    assert result.suspension.wake_at == NOW + timedelta(days=1)  # the timeout
    assert (callback.heartbeat_seconds, callback.heartbeat_at) == (300, NOW + timedelta(minutes=5))


# --- definitions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (
            lambda s: [s.await_callback("nope")],
            "cb › step 0 (await_callback) › name: no create_callback before it makes 'nope' "
            "(created: none)",
        ),
        (
            lambda s: [s.await_callback("late"), s.create_callback("late")],
            "no create_callback before it makes 'late'",
        ),
        (
            lambda s: [s.wait_for_callback("a", heartbeat="PT30S")],
            "heartbeat 'PT30S' is under PT1M",
        ),
        (
            lambda s: [s.create_callback("a", timeout="PT10M", heartbeat="PT10M")],
            "heartbeat 'PT10M' is not shorter than timeout 'PT10M'",
        ),
        (lambda s: [s.create_callback("")], "name must be a non-empty string"),
        (lambda s: [s.create_callback("a", timeout="soon")], "timeout"),
        (
            lambda s: [s.create_callback("a"), s.await_callback("a", catch="yes")],
            "catch must be True or False",
        ),
        (
            lambda s: [
                s.create_callback("a"),
                s.compute("a", lambda ctx: 1),
                s.await_callback("a"),
            ],
            "result key 'a' is already written",
        ),
    ],
)
def test_callback_steps_are_checked_when_the_workflow_is_defined(steps: Any, message: str) -> None:
    with pytest.raises(DefinitionProblems) as refused:
        _wf(steps)
    assert message in str(refused.value)


def test_old_wait_for_callback_definitions_keep_their_fingerprint() -> None:
    def flow(**wait: Any) -> WorkflowDefinition:
        return _wf(lambda s: [s.wait_for_callback("a", timeout="P1D", **wait)])

    plain, explicit = flow(), flow(heartbeat=None, catch=False)
    assert plain.fingerprint == explicit.fingerprint
    assert flow(heartbeat="PT5M").fingerprint != plain.fingerprint != flow(catch=True).fingerprint
    # What release 0.2 computed for the same step tree (without the builder's source).
    assert compute_fingerprint(plain, None) == (
        "2373fe9b9897e4d6c388ae5034c681f94bc890b663dae87608555283c3dfa6bb"
    )


def test_callback_names_and_result_keys_are_shape_timeouts_are_not() -> None:
    def flow(name: str, key: str, timeout: str) -> WorkflowDefinition:
        return _wf(
            lambda s: [
                s.create_callback(name, timeout=timeout),
                s.wait(for_="PT1H"),
                s.await_callback(name, result_key=key),
            ]
        )

    old = shape_of(flow("ok", "k", "P1D"))
    at_wait, at_await = [{"i": 1}], [{"i": 2}]
    assert first_difference(old, shape_of(flow("ok", "k", "P9D")), at_await) is None
    renamed = first_difference(old, shape_of(flow("yes", "k", "P1D")), at_wait)
    assert renamed == "step 0 (create_callback): name 'ok' → 'yes'"
    rekeyed = first_difference(old, shape_of(flow("ok", "j", "P1D")), at_await)
    assert rekeyed == "step 2 (await_callback): resultKey 'k' → 'j'"


# --- facts, fold ---------------------------------------------------------------------------


def _recorded(*facts: Any) -> list[RecordedFact]:
    return [RecordedFact(n + 1, NOW, fact) for n, fact in enumerate(facts)]


def _wait(**kw: Any) -> ev.StepWaitingForCallback:
    fields: dict[str, Any] = {
        "workflow_name": "cb",
        "trigger_event_type": "demo.fired",
        "step_index": 2,
        "path": [{"i": 2}],
        "definition_fingerprint": "f",
        "result_key": "answer",
        "token_hash": HASH,
        "timeout_at": NOW + timedelta(days=1),
    }
    return ev.StepWaitingForCallback(**{**fields, **kw})


FACTS = [
    _wait(name="ok", heartbeat_seconds=300, heartbeat_at=NOW + timedelta(minutes=5)),
    ev.CallbackCreated(
        step_index=0,
        path=[{"i": 0}],
        name="ok",
        token_hash=HASH,
        timeout_at=NOW,
        heartbeat_seconds=60,
    ),
    ev.CallbackCompleted(
        step_index=0, suspension_version=0, event_id="x", token_hash=HASH, name="ok", run_due=False
    ),
    ev.CallbackFailed(
        step_index=2,
        suspension_version=2,
        event_id="x",
        token_hash=HASH,
        error="E",
        message="E (text hash 1234abcd)",
    ),
    ev.CallbackHeartbeat(step_index=2, suspension_version=2, token_hash=HASH, deadline=NOW),
]


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: type(f).__name__)
def test_each_callback_fact_reads_back_as_written(fact: Any) -> None:
    assert ev.decode(ev.type_of(fact), fact.to_payload()) == fact


def test_a_wait_without_the_new_fields_is_stored_as_before() -> None:
    assert set(_wait().to_payload()) >= {"resultKey", "tokenHash", "timeoutAt"}
    assert not {"name", "heartbeatSeconds", "heartbeatAt"} & set(_wait().to_payload())
    completed = ev.CallbackCompleted(step_index=1, suspension_version=2, event_id="x")
    assert completed.to_payload() == {"stepIndex": 1, "suspensionVersion": 2, "eventId": "x"}


def test_a_heartbeat_moves_the_open_wait_and_an_answer_settles_it() -> None:
    beat = ev.CallbackHeartbeat(
        step_index=2, suspension_version=2, token_hash=HASH, deadline=NOW + timedelta(minutes=9)
    )
    wait = _wait(heartbeat_seconds=300, heartbeat_at=NOW + timedelta(minutes=5))
    state = fold_run("r", "t", _recorded(_started(), wait, beat))
    assert state.wake_at == NOW + timedelta(minutes=9)
    assert state.suspension.timer == "heartbeat_timeout"  # type: ignore[union-attr]
    failed = ev.CallbackFailed(
        step_index=2, suspension_version=2, event_id="x", token_hash=HASH, error="E", message="m"
    )
    state = fold_run("r", "t", _recorded(_started(), wait, beat, failed))
    assert (state.matched_event_id, state.callback_error) == ("x", "E")


def test_an_answer_kept_for_a_later_await_settles_no_wait() -> None:
    kept = ev.CallbackCompleted(
        step_index=0, suspension_version=2, event_id="x", token_hash=HASH, run_due=False
    )
    other = ev.CallbackCompleted(
        step_index=0, suspension_version=2, event_id="y", token_hash="c" * 64
    )
    for answer in (kept, other):
        state = fold_run("r", "t", _recorded(_started(), _wait(), answer))
        assert state.matched_event_id is None
    old = ev.CallbackCompleted(step_index=2, suspension_version=2, event_id="z")  # no token
    assert fold_run("r", "t", _recorded(_started(), _wait(), old)).matched_event_id == "z"


# --- seeing them ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fact", "text"),
    [
        (
            FACTS[0],
            "step 2: await callback 'ok' (result 'answer') until 2026-01-05T09:05:00Z, "
            "heartbeat every 5 min",
        ),
        (
            FACTS[1],
            "step 0: callback 'ok' created, open until 2026-01-05T09:00:00Z, heartbeat every 1 min",
        ),
        (FACTS[2], "step 0: callback 'ok' completed (payload: event x); kept for its await"),
        (FACTS[3], "step 2: callback failed: E (text hash 1234abcd)"),
        (FACTS[4], "step 2: callback heartbeat, open until 2026-01-05T09:00:00Z"),
    ],
)
def test_the_timeline_says_what_each_callback_fact_means(fact: Any, text: str) -> None:
    assert describe_event(_stored(3, fact)) == text


def test_the_graph_draws_create_and_await_linked_by_the_callback() -> None:
    wf = _wf(
        lambda s: [
            s.create_callback("ok", timeout="P2D", heartbeat="PT10M"),
            s.wait(for_="PT1H"),
            s.await_callback("ok", result_key="answer", catch=True),
        ]
    )
    chart = flowchart(wf)
    labels = {n.label: n for n in chart.nodes}
    create = labels["create callback ok, timeout P2D, heartbeat PT10M"]
    wait = labels["await callback ok → answer, catch"]
    (link,) = [e for e in chart.edges if e.label == "callback ok"]
    assert (link.source, link.target, link.dotted) == (create.id, wait.id, True)
    assert f'{create.id} -. "callback ok" .-> {wait.id}' in to_mermaid(chart)
    assert "callback ok" in to_svg(chart)
    mark_run(chart, wf, [_stored(3, _wait(name="ok", path=[{"i": 2}]))])
    assert chart.marks[wait.id] == "current"
    assert chart.notes[wait.id] == "waiting for callback 'ok' until 2026-01-06T09:00:00.000000Z"
