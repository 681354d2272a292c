"""wait_for_callback without a database: tokens, the step in a pass, the stored shapes of
its facts, the fold, the definition checks, and how a person sees it (timeline, graph)."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import DomainEvent, define_workflow, on_event
from workflow_runner import stream as ev
from workflow_runner.callback_tokens import (
    NO_CALLBACK,
    PassCallback,
    callback_links,
    is_token,
    mint_token,
    new_run_secret,
    token_hash,
    tokens_in,
)
from workflow_runner.definition.checks import DefinitionProblems
from workflow_runner.definition.dsl import WorkflowDefinition, has_callback_wait
from workflow_runner.definition.fingerprint import compute_fingerprint
from workflow_runner.errors import WorkflowDefinitionError
from workflow_runner.graph import flowchart, mark_run
from workflow_runner.graph_render import to_mermaid
from workflow_runner.interpreter import Interpreter
from workflow_runner.store import StoredEvent
from workflow_runner.stream import RecordedFact, fold_run
from workflow_runner.timeline import describe_event, shown_payload

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
EVENT = DomainEvent(id="e1", type="demo.fired", payload={"to": "a@example.com"}, tenant_id="t")
SECRET = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"
HASH = "a" * 64


def _wf(steps: Any) -> WorkflowDefinition:
    return define_workflow(name="cb", trigger=on_event("demo.fired"), steps=steps, register=False)


def _run(
    wf: WorkflowDefinition, seed: str = "t|1", path: Any = None, secret: str | None = SECRET
) -> Any:
    return Interpreter(wf, EVENT, "run-1", NOW, dispatch_seed=seed, callback_secret=secret).run(
        path
    )


def _mail_then_wait(s: Any) -> list[Any]:
    return [
        s.mail_send(to="a@example.com", subject="Approve?", body=lambda ctx: ctx.callback.url),
        s.wait_for_callback("decision", timeout="P2D"),
    ]


# --- tokens -----------------------------------------------------------------------------


def test_a_token_has_the_prefix_and_256_bits_of_base64url() -> None:
    token = mint_token(SECRET, "t|1", 0)
    assert re.fullmatch(r"wfrcb_[A-Za-z0-9_-]{43}", token)
    assert is_token(token) and not is_token(token + "x") and not is_token(token[:-1])


def test_a_token_is_the_same_for_the_same_run_secret_pass_and_ordinal_only() -> None:
    token = mint_token(SECRET, "t|1", 0)
    assert mint_token(SECRET, "t|1", 0) == token
    assert len({token, mint_token(SECRET, "t|3", 0), mint_token(SECRET, "t|1", 1)}) == 3
    assert mint_token(new_run_secret(), "t|1", 0) != token


def test_a_run_without_a_secret_gets_random_tokens() -> None:
    assert mint_token(None, "t|1", 0) != mint_token(None, "t|1", 0)
    assert new_run_secret() != new_run_secret()


def test_tokens_are_found_in_text_that_carries_them() -> None:
    one, two = mint_token(SECRET, "a", 0), mint_token(SECRET, "b", 0)
    assert tokens_in(f"Approve: https://cb.example.com/{one}\nor {two}.") == [one, two]
    assert tokens_in("no token here") == []


def test_the_stored_hash_is_the_sha256_of_the_token() -> None:
    token = mint_token(SECRET, "t|1", 0)
    assert token_hash(token) == hashlib.sha256(token.encode()).hexdigest()


def test_outside_a_pass_ctx_callback_has_neither_token_nor_url() -> None:
    assert NO_CALLBACK.token is None and NO_CALLBACK.url is None


def test_a_pass_mints_its_token_once_and_the_wait_takes_it() -> None:
    handle = PassCallback(SECRET, "t|1", "https://cb.example.com/")
    assert not handle.handed_out
    token = handle.token
    assert handle.token == token and handle.url == f"https://cb.example.com/{token}"
    assert handle.handed_out
    assert handle.take() == token and not handle.handed_out
    assert handle.token != token  # the next wait of the pass gets its own


# --- the step in a pass -------------------------------------------------------------------


def test_the_wait_suspends_with_the_hash_of_the_token_the_steps_before_it_read() -> None:
    with callback_links("https://cb.example.com"):
        result = _run(_wf(_mail_then_wait))
    assert result.outcome == "suspended"
    suspension = result.suspension
    assert suspension.kind == "waiting-for-callback"
    assert suspension.path == [{"i": 1}]
    assert suspension.wake_at == NOW + timedelta(days=2)
    (mail,) = result.dispatches
    (token,) = tokens_in(mail.request["body"])
    assert mail.request["body"] == f"https://cb.example.com/{token}"
    assert suspension.callback.result_key == "decision"
    assert suspension.callback.token_hash == token_hash(token)


def test_without_an_endpoint_the_url_is_none_and_the_token_is_still_there() -> None:
    wf = _wf(
        lambda s: [
            s.compute("link", lambda ctx: [ctx.callback.token, ctx.callback.url]),
            s.wait_for_callback("decision"),
        ]
    )
    result = _run(wf)
    token, url = result.results["link"]
    assert url is None and is_token(token)
    assert result.suspension.callback.token_hash == token_hash(token)
    assert result.suspension.wake_at == NOW + timedelta(days=7)


def test_a_repeated_pass_hands_out_the_same_token_and_another_pass_a_new_one() -> None:
    wf = _wf(_mail_then_wait)
    first, again = _run(wf, seed="t|1"), _run(wf, seed="t|1")
    later = _run(wf, seed="t|5")
    assert first.suspension.callback == again.suspension.callback
    assert later.suspension.callback.token_hash != first.suspension.callback.token_hash


def test_a_wait_nobody_read_the_token_of_still_waits_on_one() -> None:
    result = _run(_wf(lambda s: [s.wait_for_callback("decision")]))
    assert result.outcome == "suspended"
    assert re.fullmatch(r"[0-9a-f]{64}", result.suspension.callback.token_hash)


def test_a_resumed_pass_goes_on_after_the_wait_with_the_seeded_payload() -> None:
    wf = _wf(lambda s: [*_mail_then_wait(s), s.return_(lambda ctx: ctx.steps["decision"])])
    resumed = Interpreter(
        wf, EVENT, "run-1", NOW, results={"decision": {"ok": True}}, dispatch_seed="t|3"
    ).run([{"i": 1}])
    assert (resumed.outcome, resumed.return_value) == ("completed", {"ok": True})
    assert resumed.dispatches == []


def test_a_token_handed_out_before_another_suspension_fails_the_run() -> None:
    wf = _wf(
        lambda s: [
            s.mail_send(to="a@example.com", subject="s", body=lambda ctx: ctx.callback.url or "-"),
            s.wait(for_="PT1H"),
            s.wait_for_callback("decision"),
        ]
    )
    result = _run(wf)
    assert result.outcome == "failed"
    assert result.reason == "callback_not_reached"
    assert result.failed_path == [{"i": 1}]
    assert result.error == "workflow step failed (CallbackNotReached)"


def test_a_token_handed_out_inside_a_failed_retry_attempt_goes_with_the_attempt() -> None:
    wf = _wf(
        lambda s: [
            s.retry(
                times=3,
                base="PT1S",
                do=[
                    s.compute("link", lambda ctx: ctx.callback.token),
                    s.compute("flaky", lambda ctx: 1 / (ctx.workflow.retry_attempt - 1)),
                    s.wait_for_callback("decision"),
                ],
            )
        ]
    )
    first = _run(wf)
    assert (first.outcome, first.suspension.kind) == ("suspended", "retry-scheduled")
    second = _run(wf, seed="t|3", path=first.suspension.path)
    assert second.suspension.kind == "waiting-for-callback"
    assert second.suspension.callback.token_hash == token_hash(second.results["link"])


def test_a_token_handed_out_before_a_retry_that_fails_is_not_forgotten() -> None:
    wf = _wf(
        lambda s: [
            s.compute("link", lambda ctx: ctx.callback.token),
            s.retry(times=2, base="PT1S", do=[s.compute("boom", lambda ctx: 1 / 0)]),
            s.wait_for_callback("decision"),
        ]
    )
    result = _run(wf)
    assert (result.outcome, result.reason) == ("failed", "callback_not_reached")


def test_a_computed_timeout_that_is_no_duration_fails_with_the_argument_named() -> None:
    result = _run(_wf(lambda s: [s.wait_for_callback("d", timeout=lambda ctx: "soon")]))
    assert (result.outcome, result.reason) == ("failed", "invalid_argument:timeout")


# --- the definition -------------------------------------------------------------------


def test_the_builder_refuses_a_missing_result_key_and_a_bad_timeout_with_their_place() -> None:
    with pytest.raises(DefinitionProblems) as refused:
        _wf(lambda s: [s.wait_for_callback("", timeout="P1D")])
    assert "step 0 (wait_for_callback)" in str(refused.value)
    assert "result_key must be a non-empty string" in str(refused.value)
    with pytest.raises(DefinitionProblems, match=r"step 1 \(wait_for_callback\) › timeout"):
        _wf(lambda s: [s.compute("a", lambda ctx: 1), s.wait_for_callback("d", timeout="P1X")])


def test_its_result_key_counts_as_written_by_the_definition_checks() -> None:
    with pytest.raises(WorkflowDefinitionError, match="result key 'd' is already written"):
        _wf(lambda s: [s.compute("d", lambda ctx: 1), s.wait_for_callback("d")])


def test_only_workflows_with_a_callback_wait_get_a_secret() -> None:
    nested = _wf(
        lambda s: [s.for_each(over=[1], as_="x", do=[s.branch(True, [s.wait_for_callback("d")])])]
    )
    assert has_callback_wait(nested.steps)
    assert not has_callback_wait(_wf(lambda s: [s.wait(for_="PT1M")]).steps)


def test_the_fingerprint_sees_the_step_and_its_arguments() -> None:
    one = _wf(lambda s: [s.wait_for_callback("d", timeout="P1D")])
    two = _wf(lambda s: [s.wait_for_callback("d", timeout="P2D")])
    assert one.fingerprint != two.fingerprint
    assert compute_fingerprint(one, None) != compute_fingerprint(two, None)


# --- stored shapes and the fold --------------------------------------------------------------


def _waiting(**extra: Any) -> ev.StepWaitingForCallback:
    return ev.StepWaitingForCallback(
        workflow_name="cb",
        trigger_event_type="demo.fired",
        step_index=1,
        path=[{"i": 1}],
        definition_fingerprint="f",
        results_delta={},
        awaited_refs_delta={},
        result_key="decision",
        token_hash=HASH,
        timeout_at=NOW,
        **extra,
    )


def test_the_suspension_is_stored_in_this_shape_and_read_back() -> None:
    payload = _waiting().to_payload()
    assert payload == {
        "workflowName": "cb",
        "triggerEventType": "demo.fired",
        "stepIndex": 1,
        "path": [{"i": 1}],
        "definitionFingerprint": "f",
        "resultsDelta": {},
        "awaitedRefsDelta": {},
        "results": "0.2: see resultsDelta and run_results",
        "resultKey": "decision",
        "tokenHash": HASH,
        "timeoutAt": "2026-01-05T09:00:00.000000Z",
    }
    fact = ev.decode("workflow.callback.waiting", payload)
    assert fact == _waiting() and fact.due_at == NOW


def test_the_completion_is_stored_in_this_shape_and_read_back() -> None:
    fact = ev.CallbackCompleted(step_index=1, suspension_version=2, event_id="e-9")
    payload = fact.to_payload()
    assert payload == {"stepIndex": 1, "suspensionVersion": 2, "eventId": "e-9"}
    assert ev.decode("workflow.callback.completed", payload) == fact


def test_run_started_carries_the_secret_only_when_there_is_one() -> None:
    started = ev.RunStarted(
        workflow_name="cb",
        workflow_version=1,
        trigger_event_type="demo.fired",
        trigger_event_id="e1",
        definition_fingerprint="f",
        callback_secret=SECRET,
    )
    payload = started.to_payload()
    assert payload["callbackSecret"] == SECRET
    assert ev.decode(ev.RUN_STARTED, payload) == started
    older = {k: v for k, v in payload.items() if k != "callbackSecret"}
    assert ev.decode(ev.RUN_STARTED, older).callback_secret is None


def _stored(version: int, fact: Any) -> StoredEvent:
    return StoredEvent(
        position=version,
        tenant_id="t",
        stream_id="r",
        stream_type=ev.RUN_STREAM,
        version=version,
        type=ev.type_of(fact),
        payload=fact.to_payload(),
        metadata={},
        recorded_at=NOW,
    )


def _started() -> ev.RunStarted:
    return ev.RunStarted(
        workflow_name="cb",
        workflow_version=1,
        trigger_event_type="demo.fired",
        trigger_event_id="e1",
        definition_fingerprint="f",
        callback_secret=SECRET,
    )


def test_the_fold_takes_the_first_completion_of_the_open_suspension_only() -> None:
    facts = [
        _started(),
        _waiting(),
        ev.CallbackCompleted(step_index=1, suspension_version=1, event_id="stale"),
        ev.CallbackCompleted(step_index=1, suspension_version=2, event_id="first"),
        ev.CallbackCompleted(step_index=1, suspension_version=2, event_id="second"),
    ]
    state = fold_run("r", "t", [RecordedFact(i + 1, NOW, f) for i, f in enumerate(facts)])
    assert (state.status, state.suspension_version) == ("waiting", 2)
    assert isinstance(state.suspension, ev.StepWaitingForCallback)
    assert state.matched_event_id == "first"


def test_the_timeline_and_the_json_views_describe_the_facts_and_hide_the_secret() -> None:
    started, waiting = _stored(1, _started()), _stored(2, _waiting())
    completed = _stored(3, ev.CallbackCompleted(step_index=1, suspension_version=2, event_id="e9"))
    assert describe_event(waiting) == (
        "step 1: wait for a callback (result 'decision') until 2026-01-05T09:00:00Z"
    )
    assert describe_event(completed) == "step 1: callback completed (payload: event e9)"
    assert "callbackSecret" in started.payload
    assert "callbackSecret" not in shown_payload(started)
    assert shown_payload(waiting) == waiting.payload


def test_the_graph_draws_the_step_and_marks_a_run_waiting_there() -> None:
    wf = _wf(_mail_then_wait)
    chart = flowchart(wf)
    node = chart.node_for(((1, ""),))
    assert node is not None
    assert (node.label, node.shape) == ("wait for callback → decision", "hexagon")
    assert [e.label for e in chart.edges if e.source == node.id] == [
        "answered",
        "no answer in P2D: timeout",
    ]
    mark_run(chart, wf, [_stored(1, _started()), _stored(2, _waiting())])
    assert chart.marks[node.id] == "current"
    assert chart.notes[node.id] == "waiting for a callback until 2026-01-05T09:00:00.000000Z"
    assert "wait for callback → decision" in to_mermaid(chart)
