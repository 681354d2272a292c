"""Callbacks, statement by statement (issue 33, item 2): two answers of one token, an
answer or a heartbeat racing the timeout's resume, an answer racing the pass that
reaches its await — each pair run in every split order on real PostgreSQL
(harness.py), the clocks of the two sides a little apart where that matters, with the
invariants checked after each schedule:

- one winner: of two answers, or an answer and the timeout (or the heartbeat's
  timeout), or a heartbeat and an answer, exactly one decides and the other writes
  nothing, whatever each side's clock says;
- no lost answer: an answer that was recorded is what the run takes, also when it came
  before the run reached its await;
- nobody deadlocks, and the run comes to rest.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from workflow_runner import DomainEvent, Steps, WorkflowRegistry, define_workflow, on_event
from workflow_runner.callback_tokens import callback_links, tokens_in
from workflow_runner.engine import project_pending
from workflow_runner.engine.callbacks import (
    CallbackCompletion,
    CallbackHeartbeatRecorded,
    CallbackRefused,
    complete_callback,
    fail_callback,
    heartbeat_callback,
)
from workflow_runner.engine.ingest import ingest_domain_event
from workflow_runner.engine.passes import load_run
from workflow_runner.engine.resume import resume_run
from workflow_runner.store import Store
from workflow_runner.stream import (
    CALLBACK_COMPLETED,
    CALLBACK_FAILED,
    CALLBACK_HEARTBEAT,
    STEP_RESUMED,
    RunCompleted,
)

from tests.interleaving.harness import Lab, Run, explore
from tests.interleaving.test_join_protocol import T0
from tests.support import TENANT_A

HOUR = T0 + timedelta(hours=1)
JUST_BEFORE = HOUR - timedelta(seconds=1)  # an answering side whose clock is behind


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="approve",
            trigger=on_event("approve.go"),
            idempotency_key=lambda e: e.payload["id"],
            steps=lambda s: [
                s.mail_send(to="a@example.com", subject="ok?", body=lambda c: c.callback.url),
                s.wait_for_callback("answer", timeout="PT1H"),
                s.return_({"answer": Steps["answer"]}),
            ],
            register=False,
        )
    )
    registry.register(
        define_workflow(
            name="beating",
            trigger=on_event("beating.go"),
            idempotency_key=lambda e: e.payload["id"],
            steps=lambda s: [
                s.mail_send(to="a@example.com", subject="ok?", body=lambda c: c.callback.url),
                s.wait_for_callback("answer", timeout="P1D", heartbeat="PT1H"),
                s.return_({"answer": Steps["answer"]}),
            ],
            register=False,
        )
    )
    # Made at once, handed out at once, awaited after an hour (the beating one expires
    # an hour after its last heartbeat).
    for name, beats in (("later", None), ("later-beating", "PT1H")):
        registry.register(
            define_workflow(
                name=name,
                trigger=on_event(f"{name}.go"),
                idempotency_key=lambda e: e.payload["id"],
                steps=lambda s, beats=beats: [
                    s.create_callback("ok", timeout="P1D", heartbeat=beats),
                    s.mail_send(
                        to="a@example.com", subject="ok?", body=lambda c: c.callbacks["ok"].url
                    ),
                    s.wait(for_="PT1H"),
                    s.await_callback("ok", result_key="answer"),
                    s.wait(for_="P1D"),  # the run goes on waiting: a late answer must lose
                    s.return_({"answer": Steps["answer"]}),
                ],
                register=False,
            )
        )
    return registry


REGISTRY = _registry()
TOKEN: dict[str, str] = {}
Operation = Callable[[Store], Any]


def _started(workflow: str, now: Any = T0) -> Callable[[Store], None]:
    """A setup: a run of `workflow` started and projected; its token noted."""

    def setup(store: Store) -> None:
        event = DomainEvent(f"{workflow}-1", f"{workflow}.go", {"id": "1"}, TENANT_A, now, "t")
        with callback_links("https://cb.example.com/"):
            [started] = ingest_domain_event(store, event, now, REGISTRY).started
        project_pending(store, now)
        row = store.conn.execute("SELECT request FROM dispatch_outbox").fetchone()
        assert row is not None
        (TOKEN["run"], TOKEN["token"]) = (started.run_id, tokens_in(row["request"]["body"])[0])

    return setup


def complete(payload: Any, now: Any) -> Operation:
    return lambda store: complete_callback(store, TOKEN["token"], payload, now)


def fail(now: Any) -> Operation:
    return lambda store: fail_callback(store, TOKEN["token"], "Declined", "no", now)


def beat(now: Any) -> Operation:
    return lambda store: heartbeat_callback(store, TOKEN["token"], now)


def resume(step: int, now: Any) -> Operation:
    return lambda store: resume_run(store, TENANT_A, TOKEN["run"], step, now, registry=REGISTRY)


def _types(store: Store) -> list[str]:
    return [e.type for e in store.streams.load(TENANT_A, TOKEN["run"])]


def _resumes(store: Store) -> list[Any]:
    return [e.fact for e in store.streams.load(TENANT_A, TOKEN["run"]) if e.type == STEP_RESUMED]


def _settle(store: Store, now: Any) -> Any:
    """Resume the run wherever it is due at `now` (as the due scan would), until it
    rests; its result when it completed."""
    for _ in range(5):
        project_pending(store, now)
        state = load_run(store, TENANT_A, TOKEN["run"])
        waits = state.suspension
        if waits is None or (state.matched_event_id is None and waits.due_at > now):
            break
        resume_run(store, TENANT_A, TOKEN["run"], waits.step_index, now, registry=REGISTRY)
    last = store.streams.load(TENANT_A, TOKEN["run"])[-1].fact
    return last.result if isinstance(last, RunCompleted) else None


def _taken(store: Store) -> Any:
    """What the run's await took (it went on past it)."""
    state = load_run(store, TENANT_A, TOKEN["run"])
    assert state.suspension is not None and state.suspension.step_index == 4, state.suspension
    return store.results.of_run(TENANT_A, TOKEN["run"]).values["answer"]


def _answers(run: Run) -> tuple[list[Any], list[CallbackRefused]]:
    """What the two actors got: their results, and the refusals (nothing else raised:
    no deadlock, no conflict that escaped)."""
    errors = [a.error for a in run.actors if a.error is not None]
    refused = [e for e in errors if isinstance(e, CallbackRefused)]
    assert refused == errors, errors
    return [a.result for a in run.actors if a.error is None], refused


def _inbox_answers(store: Store) -> list[Any]:
    rows = store.conn.execute("SELECT detail FROM inbox WHERE type = 'workflow.callback'")
    return [r["detail"] for r in rows.fetchall()]


# --- two answers of one token ---------------------------------------------------------------


def test_two_answers_of_one_token_record_exactly_one(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        results, refused = _answers(run)
        assert len(results) == 1 and len(refused) == 1, (results, refused)
        assert refused[0].reason == "already_completed"
        types = _types(store)
        assert types.count(CALLBACK_COMPLETED) + types.count(CALLBACK_FAILED) == 1
        (answer,) = _inbox_answers(store)
        won = "a" if CALLBACK_COMPLETED in types else "failed"
        seen.add(won)
        assert answer == ({"n": "a"} if won == "a" else {"failed": True, "error": "Declined"})
        assert _settle(store, T0 + timedelta(minutes=1)) == (
            {"answer": answer} if won == "a" else None
        )

    seen: set[str] = set()
    explore(lab, _started("approve"), complete({"n": "a"}, T0), fail(T0), check)
    assert seen == {"a", "failed"}  # each side won in some order


# --- an answer, or a heartbeat, against the timeout's resume --------------------------------------


def test_an_answer_racing_the_timeout_s_resume_has_one_winner(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        results, refused = _answers(run)
        answered = any(isinstance(r, CallbackCompletion) for r in results)
        seen.add(answered)
        result = _settle(store, HOUR)
        resumed = _resumes(store)
        assert len(resumed) == 1
        if answered:  # the answer won: the timeout's resume found the run answered
            assert (resumed[0].resumed_by, result) == ("callback", {"answer": {"in": "time"}})
        else:
            assert [r.reason for r in refused] == ["not_waiting"]
            assert (resumed[0].resumed_by, result) == ("timeout", {"answer": None})
            assert _inbox_answers(store) == []

    seen: set[bool] = set()
    answer = complete({"in": "time"}, JUST_BEFORE)
    explore(lab, _started("approve"), answer, resume(1, HOUR), check)
    assert seen == {True, False}


def test_a_heartbeat_racing_the_heartbeat_timeout_s_resume_has_one_winner(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        results, refused = _answers(run)
        beat_won = any(isinstance(r, CallbackHeartbeatRecorded) for r in results)
        seen.add(beat_won)
        state = load_run(store, TENANT_A, TOKEN["run"])
        if beat_won:  # the wait goes on, its deadline moved by the heartbeat
            assert state.status == "waiting" and state.wake_at == JUST_BEFORE + timedelta(hours=1)
            assert _types(store)[-1] == CALLBACK_HEARTBEAT
        else:
            assert [r.reason for r in refused] == ["not_waiting"]
            assert [r.resumed_by for r in _resumes(store)] == ["heartbeat_timeout"]
            assert CALLBACK_HEARTBEAT not in _types(store)

    seen: set[bool] = set()
    explore(lab, _started("beating"), beat(JUST_BEFORE), resume(1, HOUR), check)
    assert seen == {True, False}


def test_a_heartbeat_and_an_answer_never_leave_a_heartbeat_after_the_answer(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        _, refused = _answers(run)
        types = _types(store)
        assert types.count(CALLBACK_COMPLETED) == 1
        seen.add(bool(refused))
        if refused:  # the answer came first: the heartbeat found it answered
            assert [r.reason for r in refused] == ["already_completed"]
            assert CALLBACK_HEARTBEAT not in types
        else:
            assert types.index(CALLBACK_HEARTBEAT) < types.index(CALLBACK_COMPLETED)
        assert _settle(store, T0 + timedelta(minutes=5)) == {"answer": "done"}

    at = T0 + timedelta(minutes=5)
    seen: set[bool] = set()
    explore(lab, _started("beating"), beat(at), complete("done", at), check)
    assert seen == {True, False}


# --- an answer before its await ------------------------------------------------------------


def test_an_answer_racing_the_pass_that_reaches_its_await_is_never_lost(lab: Lab) -> None:
    def check(store: Store, run: Run) -> None:
        results, refused = _answers(run)
        assert refused == [] and len(results) == 2, run.errors
        _settle(store, HOUR)
        assert _taken(store) == "early"

    answer = complete("early", HOUR - timedelta(minutes=1))
    explore(lab, _started("later"), answer, resume(2, HOUR), check)


# The await comes 90 minutes in: the callback expired an hour in, having had no
# heartbeat. The answering side's clock says it is still open.
LATE = T0 + timedelta(minutes=90)


def test_an_answer_with_a_slow_clock_racing_an_await_that_finds_it_expired(lab: Lab) -> None:
    late = LATE

    def check(store: Store, run: Run) -> None:
        results, refused = _answers(run)
        answered = any(isinstance(r, CallbackCompletion) for r in results)
        seen.add(answered)
        _settle(store, late)
        if answered:
            assert _taken(store) == "skewed"
        else:
            assert [r.reason for r in refused] == ["expired"]
            assert _taken(store) is None and _inbox_answers(store) == []

    seen: set[bool] = set()
    answer = complete("skewed", JUST_BEFORE)
    explore(lab, _started("later-beating"), answer, resume(2, late), check)
    assert seen == {True, False}


def test_a_heartbeat_with_a_slow_clock_racing_an_await_that_finds_it_expired(lab: Lab) -> None:
    late = LATE

    def check(store: Store, run: Run) -> None:
        results, refused = _answers(run)
        _settle(store, late)
        state = load_run(store, TENANT_A, TOKEN["run"])
        seen.add(any(isinstance(r, CallbackHeartbeatRecorded) for r in results))
        if any(isinstance(r, CallbackHeartbeatRecorded) for r in results):
            # The heartbeat kept it open: the await waits for it.
            assert state.status == "waiting" and state.suspension is not None
            assert state.suspension.step_index == 3
        else:
            assert [r.reason for r in refused] == ["expired"]
            assert _taken(store) is None

    seen: set[bool] = set()
    explore(lab, _started("later-beating"), beat(JUST_BEFORE), resume(2, late), check)
    assert seen == {True, False}
