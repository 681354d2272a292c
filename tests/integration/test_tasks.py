"""Durable tasks on real PostgreSQL: a task runs outside the pass on a worker, its
outcome is recorded on the run stream, and the run resumes at once with the result."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from workflow_runner import ManualClock, RetryPolicy, on_event, run_id_for
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import CapturedMailer, InMemoryResumeQueue, RecordingHttpSender
from workflow_runner.aws.ports import PinnedHttpSender
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import resume_runs
from workflow_runner.engine.projection import project_pending
from workflow_runner.engine.resume import ResumeRequestItem
from workflow_runner.engine.tasks import TaskPorts, run_task
from workflow_runner.engine.worker import WorkResult, work
from workflow_runner.ports import HttpResponse
from workflow_runner.store import Store, connect
from workflow_runner.webhook_guard import WebhookGuard

from tests.support import TENANT_A, refuse_pass_writes, register, resume_due, stream, trigger

PUBLIC = WebhookGuard(resolver=lambda host, port: ["93.184.215.14"])
NO_JITTER = dict(jitter="none", base="PT2S", cap="PT1M")


class Rig:
    """The worker and the resume queue around one database, driven by hand."""

    def __init__(self, store: Store, registry: WorkflowRegistry, clock: ManualClock) -> None:
        self.store, self.registry, self.clock = store, registry, clock
        self.queue = InMemoryResumeQueue(clock)
        self.mailer = CapturedMailer()
        self.http: Any = RecordingHttpSender()
        self.guard = PUBLIC

    def ports(self) -> TaskPorts:
        return TaskPorts(
            self.registry, self.mailer, self.http, self.guard, mail_sender="noreply@example.com"
        )

    def work(self, seconds: float = 60.0) -> WorkResult:
        project_pending(self.store, self.clock.now())
        deadline = time.monotonic() + seconds
        result = work(
            self.store,
            self.ports(),
            self.queue,
            self.clock.now,
            lambda: deadline - time.monotonic(),
            rng=random.Random(3),
        )
        project_pending(self.store, self.clock.now())
        return result

    def resume_sent(self) -> list[Any]:
        """Resume what the queue holds now (as ResumeRun would)."""
        messages = self.queue.receive(limit=100)
        items = [ResumeRequestItem(m.tenant_id, m.run_id, m.step_index) for m in messages]
        results = resume_runs(self.store, items, self.clock.now(), self.registry) if items else []
        project_pending(self.store, self.clock.now())
        return results

    def settle(self, rounds: int = 20) -> None:
        """Work and resume (sent requests, and timers due now) until nothing is due."""
        for _ in range(rounds):
            self.work()
            sent = self.resume_sent()
            if not sent and not resume_due(self.store, self.registry, self.clock.now()):
                return


@pytest.fixture
def rig(store: Store, registry: WorkflowRegistry, clock: ManualClock) -> Rig:
    return Rig(store, registry, clock)


def _types(store: Store, run_id: str) -> list[str]:
    return [e.type for e in stream(store, run_id)]


def test_a_task_runs_on_the_worker_and_the_run_resumes_with_its_result(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    calls: list[dict[str, Any]] = []

    def charge(ctx: Any) -> dict[str, Any]:
        calls.append(
            {
                "attempt": ctx.workflow.retry_attempt,
                "key": ctx.workflow.task_key,
                "order": ctx.event.payload["order"],
                "before": ctx.steps["before"],
            }
        )
        return {"charged": ctx.event.payload["order"]}

    register(
        registry,
        name="pay",
        trigger=on_event("pay.go"),
        idempotency_key=lambda e: e.payload["order"],
        steps=lambda s: [
            s.compute("before", lambda ctx: 7),
            s.task("charge", charge),
            s.return_(lambda ctx: {"paid": ctx.steps["charge"], "before": ctx.steps["before"]}),
        ],
    )
    trigger(store, registry, "pay.go", {"order": "o-1"}, clock.now())
    run_id = run_id_for("pay", "o-1")
    assert _types(store, run_id) == [ev.RUN_STARTED, ev.TASK_SCHEDULED]
    assert calls == []  # not inside the pass

    result = rig.work()
    assert [t.outcome for t in result.tasks] == ["completed"]
    assert result.resumes_sent == 1  # resumed at once, no due-scan tick
    rig.resume_sent()
    done = stream(store, run_id)[-1]
    assert done.type == ev.RUN_COMPLETED
    assert done.payload["result"] == {"paid": {"charged": "o-1"}, "before": 7}
    scheduled = stream(store, run_id)[1].payload
    assert calls == [{"attempt": 1, "key": scheduled["taskId"], "order": "o-1", "before": 7}]
    completed = [e for e in stream(store, run_id) if e.type == ev.TASK_COMPLETED]
    assert [e.payload["result"] for e in completed] == [{"charged": "o-1"}]


def test_retries_back_off_by_the_policy_then_succeed(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    attempts: list[tuple[int, str]] = []

    def flaky(ctx: Any) -> str:
        attempts.append((ctx.workflow.retry_attempt, ctx.workflow.task_key))
        if ctx.workflow.retry_attempt < 3:
            raise ConnectionError("partner down for ada@example.com")
        return "ok"

    register(
        registry,
        name="flaky",
        trigger=on_event("flaky.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.task("call", flaky, retry=RetryPolicy(max_attempts=3, **NO_JITTER)),
            s.return_(lambda ctx: ctx.steps["call"]),
        ],
    )
    trigger(store, registry, "flaky.go", {}, clock.now())
    run_id = run_id_for("flaky", "k")
    start = clock.now()
    assert [t.outcome for t in rig.work().tasks] == ["retry"]
    failed = [e for e in stream(store, run_id) if e.type == ev.TASK_ATTEMPT_FAILED]
    assert failed[0].payload["errorClass"] == "ConnectionError"
    assert failed[0].payload["error"] == "workflow step failed (ConnectionError)"
    assert "ada@example.com" not in json.dumps(failed[0].payload)  # never raw text
    assert failed[0].fact.retry_at == start + timedelta(seconds=2)

    assert rig.work().tasks == []  # not due before its backoff
    clock.advance(timedelta(seconds=2))
    assert [t.outcome for t in rig.work().tasks] == ["retry"]
    second = [e for e in stream(store, run_id) if e.type == ev.TASK_ATTEMPT_FAILED][-1]
    assert second.fact.retry_at == clock.now() + timedelta(seconds=4)  # exponential
    clock.advance(timedelta(seconds=4))
    rig.settle()
    assert stream(store, run_id)[-1].payload["result"] == "ok"
    assert [a for a, _ in attempts] == [1, 2, 3]
    assert len({key for _, key in attempts}) == 1  # one idempotency key for the group


def test_a_non_retryable_error_fails_the_run_at_once_with_task_failed(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    def reject(ctx: Any) -> None:
        raise ValueError("card 4111 declined")

    register(
        registry,
        name="strict",
        trigger=on_event("strict.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.task("card", reject, retry=RetryPolicy(max_attempts=5, non_retryable=(ValueError,))),
            s.return_({"isSuccess": True}),
        ],
    )
    trigger(store, registry, "strict.go", {}, clock.now())
    rig.settle()
    run_id = run_id_for("strict", "k")
    failed_task = [e for e in stream(store, run_id) if e.type == ev.TASK_FAILED]
    assert [(e.payload["attempts"], e.payload["reason"]) for e in failed_task] == [
        (1, "non_retryable")
    ]
    end = stream(store, run_id)[-1]
    assert end.type == ev.RUN_FAILED
    assert (end.payload["reason"], end.payload["error"]) == (
        "task_failed",
        "workflow step failed (ValueError)",
    )
    # The message's words, not its digits alone: "4111" turns up by chance in the
    # random ids the stream holds (one did, in one run of the suite).
    stored = json.dumps([e.payload for e in stream(store, run_id)])
    assert "card 4111" not in stored and "declined" not in stored


def test_catch_lets_the_run_go_on_with_the_failure(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    def always(ctx: Any) -> None:
        raise TimeoutError("slow")

    register(
        registry,
        name="caught",
        trigger=on_event("caught.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.task("call", always, retry=RetryPolicy(max_attempts=2, **NO_JITTER), catch=True),
            s.return_(lambda ctx: ctx.steps["call"]),
        ],
    )
    trigger(store, registry, "caught.go", {}, clock.now())
    rig.settle()
    clock.advance(timedelta(seconds=2))
    rig.settle()
    run_id = run_id_for("caught", "k")
    assert stream(store, run_id)[-1].payload["result"] == {
        "failed": True,
        "error": "TimeoutError",
        "attempts": 2,
    }


def test_an_attempt_over_its_timeout_fails_and_is_retried(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    def slow(ctx: Any) -> str:
        if ctx.workflow.retry_attempt == 1:
            time.sleep(5)
        return "second time lucky"

    register(
        registry,
        name="slow",
        trigger=on_event("slow.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.task("call", slow, timeout="PT1S", retry=RetryPolicy(**NO_JITTER)),
            s.return_(lambda ctx: ctx.steps["call"]),
        ],
    )
    trigger(store, registry, "slow.go", {}, clock.now())
    started = time.monotonic()
    assert [t.error_class for t in rig.work().tasks] == ["TaskTimeout"]
    assert time.monotonic() - started < 4  # cut off after 1 s, not after 5
    clock.advance(timedelta(seconds=2))
    rig.settle()
    assert stream(store, run_id_for("slow", "k"))[-1].payload["result"] == "second time lucky"


def test_a_worker_that_dies_mid_attempt_costs_one_attempt_and_no_more(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    runs: list[int] = []

    def once(ctx: Any) -> int:
        runs.append(ctx.workflow.retry_attempt)
        return ctx.workflow.retry_attempt

    register(
        registry,
        name="crashy",
        trigger=on_event("crashy.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.task("call", once, timeout="PT10S"),
            s.return_(lambda ctx: ctx.steps["call"]),
        ],
    )
    trigger(store, registry, "crashy.go", {}, clock.now())
    # A worker claims the attempt and dies before recording anything.
    with store.transaction():
        claimed = store.tasks.claim(clock.now(), 60_000, 10_000, 5.0)
    assert claimed is not None and claimed.attempt == 1
    assert rig.work().tasks == []  # its lease still holds: nobody else runs it
    clock.advance(timedelta(seconds=16))  # timeout 10 s + margin 5 s have passed
    result = rig.work()
    assert [(t.outcome, t.attempt) for t in result.tasks] == [("completed", 2)]
    rig.resume_sent()
    run_id = run_id_for("crashy", "k")
    lost = [e.payload for e in stream(store, run_id) if e.type == ev.TASK_ATTEMPT_FAILED]
    assert [(p["attempt"], p["errorClass"]) for p in lost] == [(1, "TaskLeaseExpired")]
    assert runs == [2]  # attempt 1 never ran here; attempt 2 ran once
    assert stream(store, run_id)[-1].payload["result"] == 2


def test_two_workers_racing_one_task_record_one_outcome(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock, db_url: str
) -> None:
    register(
        registry,
        name="race",
        trigger=on_event("race.go"),
        idempotency_key="k",
        steps=lambda s: [s.task("call", lambda ctx: "x"), s.return_(lambda ctx: ctx.steps["call"])],
    )
    trigger(store, registry, "race.go", {}, clock.now())
    from workflow_runner.store import connect

    others = [connect(db_url) for _ in range(4)]
    outcomes: list[Any] = []
    barrier = threading.Barrier(len(others))

    def worker(other: Store) -> None:
        barrier.wait()
        outcomes.append(run_task(other, rig.ports(), clock.now, lambda: 60.0))

    threads = [threading.Thread(target=worker, args=(o,)) for o in others]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for other in others:
        other.close()
    done = [o for o in outcomes if o is not None]
    assert [o.outcome for o in done] == ["completed"]  # SKIP LOCKED: one claim
    run_id = run_id_for("race", "k")
    assert _types(store, run_id).count(ev.TASK_COMPLETED) == 1


def test_tasks_inside_for_each_branch_and_retry(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    seen: list[tuple[str, int]] = []

    def per_item(ctx: Any) -> str:
        seen.append((ctx.scope["sku"], ctx.workflow.retry_attempt))
        return ctx.scope["sku"].upper()

    def shaky(ctx: Any) -> str:
        if ctx.steps.get("tries", 0) < 2:
            raise RuntimeError("no")
        return "steady"

    register(
        registry,
        name="nested-tasks",
        trigger=on_event("nested.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.for_each(
                over=lambda ctx: ctx.event.payload["skus"],
                as_="sku",
                do=[
                    s.task("item", per_item),
                    s.compute(
                        "items", lambda ctx: [*ctx.steps.get("items", []), ctx.steps["item"]]
                    ),
                ],
            ),
            s.branch(
                if_=lambda ctx: len(ctx.steps["items"]) == 2,
                on_true=[
                    s.retry(
                        times=3,
                        backoff="fixed",
                        base="PT1S",
                        do=[
                            s.compute("tries", lambda ctx: ctx.steps.get("tries", 0) + 1),
                            s.task("shaky", shaky, retry=RetryPolicy(max_attempts=1)),
                        ],
                    )
                ],
            ),
            s.return_(lambda ctx: {"items": ctx.steps["items"], "shaky": ctx.steps["shaky"]}),
        ],
    )
    trigger(store, registry, "nested.go", {"skus": ["a", "b"]}, clock.now())
    for _ in range(6):
        rig.settle()
        clock.advance(timedelta(seconds=1))
    run_id = run_id_for("nested-tasks", "k")
    assert stream(store, run_id)[-1].payload["result"] == {"items": ["A", "B"], "shaky": "steady"}
    assert seen == [("a", 1), ("b", 1)]
    scheduled = [e.payload for e in stream(store, run_id) if e.type == ev.TASK_SCHEDULED]
    # One task id per for_each item and per retry attempt: never reused.
    assert len({p["taskId"] for p in scheduled}) == len(scheduled) == 4  # a, b, shaky x2


class _Partner(BaseHTTPRequestHandler):
    answers: ClassVar[list[tuple[int, bytes]]] = []
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        type(self).received.append(
            {"key": self.headers["idempotency-key"], "body": json.loads(self.rfile.read(length))}
        )
        status, body = type(self).answers.pop(0)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def partner() -> Iterator[str]:
    _Partner.answers, _Partner.received = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Partner)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_a_webhook_with_result_key_puts_the_partners_answer_in_the_run(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock, partner: str
) -> None:
    rig.guard = WebhookGuard(allow_hosts=["127.0.0.1"])
    rig.http = PinnedHttpSender(rig.guard)
    _Partner.answers = [(503, b"{}"), (201, json.dumps({"accepted": True, "id": 9}).encode())]
    register(
        registry,
        name="hook",
        trigger=on_event("hook.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.webhook_send(
                url=f"{partner}/orders",
                body=lambda ctx: {"order": 1},
                result_key="partner",
                retry=RetryPolicy(max_attempts=3, **NO_JITTER),
            ),
            s.branch(
                if_=lambda ctx: ctx.steps["partner"]["body"]["accepted"],
                on_true=[s.return_(lambda ctx: {"id": ctx.steps["partner"]["body"]["id"]})],
                on_false=[s.return_({"isSuccess": False})],
            ),
        ],
    )
    trigger(store, registry, "hook.go", {}, clock.now())
    rig.settle()
    clock.advance(timedelta(seconds=2))
    rig.settle()
    run_id = run_id_for("hook", "k")
    assert stream(store, run_id)[-1].payload["result"] == {"id": 9}
    completed = [e.payload for e in stream(store, run_id) if e.type == ev.TASK_COMPLETED]
    assert completed[0]["result"] == {"status": 201, "body": {"accepted": True, "id": 9}}
    keys = {r["key"] for r in _Partner.received}
    assert len(_Partner.received) == 2 and len(keys) == 1  # the same Idempotency-Key


@pytest.mark.parametrize(
    ("levels", "decoded"), [(99, True), (100, False), (30_000, False)], ids=str
)
def test_a_partners_answer_is_json_to_the_run_only_as_deep_as_a_result_may_be(
    rig: Rig,
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    levels: int,
    decoded: bool,
) -> None:
    """Deeper answers are kept as their text. 100 levels decoded, and the task result
    around them ({"status", "body"}) then failed the task as not storable; 30,000 (60 KB,
    within the 64 KB kept) made json.loads raise RecursionError in the worker."""
    deep = "[" * levels + "]" * levels
    rig.http = RecordingHttpSender(respond=lambda r: HttpResponse(200, {}, deep.encode()))
    register(
        registry,
        name="hook",
        trigger=on_event("hook.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.webhook_send(url="https://hooks.example.com/x", body={}, result_key="partner"),
            s.return_({"isSuccess": True}),
        ],
    )
    trigger(store, registry, "hook.go", {}, clock.now())
    rig.settle()
    run_id = run_id_for("hook", "k")
    completed = [e.payload for e in stream(store, run_id) if e.type == ev.TASK_COMPLETED]
    body = json.loads(deep) if decoded else deep
    assert completed[0]["result"] == {"status": 200, "body": body}
    assert stream(store, run_id)[-1].payload["result"] == {"isSuccess": True}


def test_a_refused_destination_fails_at_once_and_catch_applies(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    rig.guard = WebhookGuard(resolver=lambda host, port: ["10.0.0.7"])
    register(
        registry,
        name="internal",
        trigger=on_event("internal.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.webhook_send(url="https://internal.example.com/x", result_key="r", catch=True),
            s.return_(lambda ctx: ctx.steps["r"]),
        ],
    )
    trigger(store, registry, "internal.go", {}, clock.now())
    rig.settle()
    run_id = run_id_for("internal", "k")
    assert rig.http.requests == []
    failed = [e.payload for e in stream(store, run_id) if e.type == ev.TASK_FAILED]
    assert [(p["reason"], p["attempts"]) for p in failed] == [("refused", 1)]
    assert stream(store, run_id)[-1].payload["result"] == {
        "failed": True,
        "error": "WebhookRefused",
        "attempts": 1,
    }


def test_a_mail_with_result_key_yields_the_message_id(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="mailer",
        trigger=on_event("mail.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.mail_send(to="ada@example.com", subject="s", body="b", result_key="sent"),
            s.return_(lambda ctx: ctx.steps["sent"]),
        ],
    )
    trigger(store, registry, "mail.go", {}, clock.now())
    rig.settle()
    assert stream(store, run_id_for("mailer", "k"))[-1].payload["result"] == {
        "messageId": "local-1"
    }
    assert len(rig.mailer.sent) == 1


@pytest.mark.parametrize(
    "value", ["nul \x00", "lone \ud800", float("nan"), "x" * (300 * 1024)], ids=repr
)
def test_a_task_result_postgresql_cannot_store_fails_the_task_not_the_worker(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock, value: Any
) -> None:
    register(
        registry,
        name="poison",
        trigger=on_event("poison.go"),
        idempotency_key="k",
        steps=lambda s: [s.task("bad", lambda ctx: value), s.return_({"isSuccess": True})],
    )
    trigger(store, registry, "poison.go", {}, clock.now())
    rig.settle()
    run_id = run_id_for("poison", "k")
    failed = [e.payload for e in stream(store, run_id) if e.type == ev.TASK_FAILED]
    assert [p["reason"] for p in failed] == ["result_not_storable"]
    # The run says why, as a compute's unstorable result does (README: Tasks).
    assert stream(store, run_id)[-1].payload["reason"] == "result_not_storable"


def test_a_poison_result_on_a_trigger_fails_that_run_only(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="healthy",
        trigger=on_event("both.go"),
        idempotency_key="k",
        steps=lambda s: [s.return_({"isSuccess": True})],
    )
    register(
        registry,
        name="sick",
        trigger=on_event("both.go"),
        idempotency_key="k",
        steps=lambda s: [s.compute("bad", lambda ctx: "\x00"), s.return_({"isSuccess": True})],
    )
    result = trigger(store, registry, "both.go", {}, clock.now())
    assert result.stored
    outcomes = {o.workflow_name: (o.outcome, o.reason) for o in result.started}
    assert outcomes == {
        "healthy": ("completed", None),
        "sick": ("failed", "result_not_storable"),
    }


def test_a_pass_the_database_refuses_fails_its_run_instead_of_retrying_forever(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:

    register(
        registry,
        name="refused",
        trigger=on_event("refused.go"),
        idempotency_key="k",
        steps=lambda s: [s.wait(for_="PT1M"), s.compute("x", lambda ctx: 1)],
    )
    trigger(store, registry, "refused.go", {}, clock.now())
    run_id = run_id_for("refused", "k")

    refuse_pass_writes(monkeypatch)
    clock.advance(timedelta(minutes=1))
    results = resume_runs(store, [ResumeRequestItem(TENANT_A, run_id, 0)], clock.now(), registry)
    assert [(getattr(r, "outcome", r), getattr(r, "reason", None)) for r in results] == [
        ("failed", "pass_not_storable")
    ]
    end = stream(store, run_id)[-1]
    assert (end.type, end.payload["error"]) == (ev.RUN_FAILED, "workflow step failed (StoreError)")


def test_cancelling_a_run_stops_its_task(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    from workflow_runner.engine import cancel_run

    ran: list[int] = []
    register(
        registry,
        name="cancel-me",
        trigger=on_event("cancel.go"),
        idempotency_key="k",
        steps=lambda s: [s.task("t", lambda ctx: ran.append(1))],
    )
    trigger(store, registry, "cancel.go", {}, clock.now())
    cancel_run(store, TENANT_A, run_id_for("cancel-me", "k"), clock.now())
    assert rig.work().tasks == []
    assert ran == []


def test_a_run_waiting_for_its_task_is_not_resumed_even_by_force(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    from workflow_runner.engine import resume_run

    register(
        registry,
        name="patient",
        trigger=on_event("patient.go"),
        idempotency_key="k",
        steps=lambda s: [s.task("t", lambda ctx: 1)],
    )
    trigger(store, registry, "patient.go", {}, clock.now())
    result = resume_run(
        store, TENANT_A, run_id_for("patient", "k"), 0, clock.now(), force=True, registry=registry
    )
    assert (result.outcome, result.reason, result.wake_at) == ("not-due", "waiting_for_task", None)


def test_the_dispatcher_stops_before_its_time_runs_out(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    from workflow_runner.engine.dispatcher import dispatch_pending

    register(
        registry,
        name="many-hooks",
        trigger=on_event("hooks.go"),
        idempotency_key="k",
        steps=lambda s: [s.webhook_send(url=f"https://hooks.example.com/{i}") for i in range(6)],
    )
    trigger(store, registry, "hooks.go", {}, clock.now())
    budget = {"left": 9.0}
    timeouts: list[float] = []

    def hang(request: Any) -> HttpResponse:
        timeouts.append(request.timeout)
        budget["left"] -= request.timeout  # each call uses all the time it was given
        raise TimeoutError("partner hangs")

    result = dispatch_pending(
        store,
        clock.now,
        CapturedMailer(),
        RecordingHttpSender(respond=hang),
        PUBLIC,
        timeout=10.0,
        seconds_left=lambda: budget["left"],
    )
    # 9 s left: the first call is bounded to 9 - 2 s kept for recording its outcome;
    # after it no call fits, and the dispatcher stops instead of overrunning.
    assert timeouts == [7.0]
    assert [(o.outcome, o.error) for o in result.outcomes] == [("retry", "timeout")]
    assert result.drained is False
    # The rows it could not start are due again at once, their attempt not counted.
    claimable = store.outbox.claim(clock.now(), clock.now() + timedelta(minutes=1), 10)
    assert len(claimable) == 5 and {row.attempts for row in claimable} == {1}


def test_a_mail_task_whose_worker_died_mid_send_ends_ambiguous(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="mail-task",
        trigger=on_event("mailtask.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.mail_send(to="ada@example.com", subject="s", body="b", result_key="m", catch=True),
            s.return_(lambda ctx: ctx.steps["m"]),
        ],
    )
    trigger(store, registry, "mailtask.go", {}, clock.now())
    with store.transaction():
        assert store.tasks.claim(clock.now(), 60_000, 10_000, 5.0) is not None  # then dies
    clock.advance(timedelta(seconds=16))
    rig.settle()
    assert rig.mailer.sent == []  # never sent twice: not sent again at all
    end = stream(store, run_id_for("mail-task", "k"))[-1]
    assert end.payload["result"] == {
        "failed": True,
        "error": "MailDeliveryAmbiguous",
        "attempts": 1,
    }


def test_a_failed_task_is_on_the_timeline_the_graph_and_the_doctor(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    from workflow_runner.engine.doctor import check_tasks
    from workflow_runner.graph import run_chart
    from workflow_runner.timeline import describe_event, run_timeline

    def broken(ctx: Any) -> None:
        raise KeyError("missing")

    wf = register(
        registry,
        name="visible",
        trigger=on_event("visible.go"),
        idempotency_key="k",
        steps=lambda s: [
            s.task("lookup", broken, retry=RetryPolicy(max_attempts=2, **NO_JITTER), catch=True),
            s.mail_send(to="ada@example.com", subject="s", body="b"),
            s.return_({"isSuccess": True}),
        ],
    )
    trigger(store, registry, "visible.go", {}, clock.now())
    rig.settle()
    clock.advance(timedelta(seconds=2))
    rig.settle()
    run_id = run_id_for("visible", "k")
    lines = [describe_event(e) for e in run_timeline(store, TENANT_A, run_id)]
    assert "step 0: task 'lookup' (up to 2 attempts)" in lines
    assert any(line.startswith("task 'lookup' attempt 1 failed (KeyError)") for line in lines)
    assert "task 'lookup' failed after 2 attempt(s): KeyError (attempts_exhausted)" in lines
    assert "step 1: mail.send requested" in lines  # the delivery's stream, woven in

    chart = run_chart(store, wf, TENANT_A, run_id)
    node = chart.node_for(((0, ""),))
    assert node is not None
    assert chart.marks[node.id] == "failed"
    assert chart.notes[node.id] == "task failed: KeyError (attempts_exhausted)"

    check = check_tasks(store, None, clock.now())
    assert check.status == "warning" and "1 task(s) failed" in check.summary
    assert any(run_id in item for item in check.items)


def test_a_task_nobody_runs_is_reported_stuck(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    from workflow_runner.engine.doctor import check_tasks

    register(
        registry,
        name="orphan",
        trigger=on_event("orphan.go"),
        idempotency_key="k",
        steps=lambda s: [s.task("t", lambda ctx: 1)],
    )
    trigger(store, registry, "orphan.go", {}, clock.now())
    assert check_tasks(store, None, clock.now() + timedelta(minutes=5)).status == "ok"
    late = check_tasks(store, None, clock.now() + timedelta(minutes=11))
    assert late.status == "problem" and "no worker is running them" in late.summary


def _count_run_reads(store: Store) -> list[str]:
    """The runs `store` reads (StreamStore.load_run), in order, from now on."""
    reads: list[str] = []
    load_run = store.streams.load_run

    def counted(tenant_id: str, run_id: str, **kwargs: Any) -> Any:
        reads.append(run_id)
        return load_run(tenant_id, run_id, **kwargs)

    store.streams.load_run = counted  # type: ignore[method-assign]
    return reads


def test_an_attempts_outcome_is_appended_on_the_run_it_read_before_it_ran(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    # Nothing else writes to the run while its task runs, so the outcome's append goes
    # after the version the attempt read: the run is read once per attempt, not twice.
    register(
        registry,
        name="pay",
        trigger=on_event("pay.go"),
        idempotency_key=lambda e: e.payload["order"],
        steps=lambda s: [s.task("charge", lambda ctx: 1), s.return_(lambda ctx: 2)],
    )
    trigger(store, registry, "pay.go", {"order": "o-1"}, clock.now())
    reads = _count_run_reads(store)
    attempt = run_task(store, rig.ports(), clock.now, lambda: 60.0, random.Random(1))
    assert attempt is not None and attempt.outcome == "completed" and attempt.run_due
    assert reads == [run_id_for("pay", "o-1")]
    assert _types(store, run_id_for("pay", "o-1"))[-1] == ev.TASK_COMPLETED


def test_a_sibling_outcome_recorded_while_an_attempt_ran_is_read_before_its_own(
    rig: Rig, store: Store, registry: WorkflowRegistry, clock: ManualClock, db_url: str
) -> None:
    # The first attempt read the run, then its sibling's outcome was appended (by another
    # worker) while it ran: its own cannot go after the version it read. It is appended
    # after the sibling's, on the run read again, and the run is due with both.
    inner: list[Any] = []

    def call(name: str) -> Any:
        def body(ctx: Any) -> str:
            if not inner:
                inner.append(None)
                second = connect(db_url)
                try:
                    inner[0] = run_task(
                        second, rig.ports(), clock.now, lambda: 60.0, random.Random(2)
                    )
                finally:
                    second.close()
            return name

        return body

    register(
        registry,
        name="both",
        trigger=on_event("both.go"),
        idempotency_key=lambda e: e.payload["order"],
        steps=lambda s: [
            s.parallel(s.task("a", call("a")), s.task("b", call("b")), result_key="ab"),
            s.return_(lambda ctx: ctx.steps["ab"]),
        ],
    )
    trigger(store, registry, "both.go", {"order": "o-1"}, clock.now())
    run_id = run_id_for("both", "o-1")
    reads = _count_run_reads(store)
    first = run_task(store, rig.ports(), clock.now, lambda: 60.0, random.Random(1))
    assert reads == [run_id, run_id]  # before it ran, and again after its append lost
    sibling = inner[0]
    assert sibling is not None and sibling.outcome == "completed" and not sibling.run_due
    assert first is not None and first.outcome == "completed" and first.run_due
    keys = [e.payload["taskKey"] for e in stream(store, run_id) if e.type == ev.TASK_COMPLETED]
    assert keys == [sibling.task_key, first.task_key]
    rig.settle()
    done = stream(store, run_id)[-1]
    assert done.type == ev.RUN_COMPLETED
    assert done.payload["result"] == ["a", "b"]
