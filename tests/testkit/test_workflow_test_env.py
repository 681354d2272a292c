"""WorkflowTestEnv: the handlers of the SAM application on a database of its own, a clock
that moves only with `advance`, mail and webhooks captured, webhook answers stubbed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from workflow_runner import Event, RetryPolicy, StepContext, Steps, define_workflow, on_event
from workflow_runner.errors import (
    InvalidInput,
    NotConfigured,
    RunNotFound,
    UnknownWorkflow,
    WorkflowDefinitionError,
)
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A, TENANT_B, nested

MakeEnv = Callable[..., WorkflowTestEnv]  # the make_env fixture (tests/testkit/conftest.py)
ORDER = {"orderId": "o-1", "email": "ada@example.com", "total": 5}
T0 = "2030-01-01T09:00:00Z"


def test_an_event_starts_a_run_that_waits_with_the_words_of_wfr_runs_show(
    make_env: MakeEnv,
) -> None:
    env = make_env(modules=["sample_workflows"], now=T0)
    env.put_event(tenant=TENANT_A, type="order.placed", payload=ORDER)
    run = env.run(tenant=TENANT_A, workflow="order-approval", key="o-1")
    assert run.status == "waiting"
    assert run.waiting_for == "order.approved"
    assert run.wake_at == datetime(2030, 1, 4, 9, 0, tzinfo=UTC)
    assert run.event_types == ["workflow.run-started", "workflow.step.waiting-for-event"]
    assert [m.subject for m in env.mails] == ["We received your order"]
    assert env.mails[0].to == ["ada@example.com"]


def test_an_awaited_event_wakes_the_run_and_its_payload_is_a_step_result(
    make_env: MakeEnv,
) -> None:
    env = make_env(modules=["sample_workflows"], now=T0)
    env.put_event(tenant=TENANT_A, type="order.placed", payload=ORDER)
    env.advance("PT1H")
    env.put_event(
        tenant=TENANT_A, type="order.approved", payload={"orderId": "o-1", "approver": "bo"}
    )
    run = env.run(tenant=TENANT_A, workflow="order-approval", key="o-1")
    assert run.status == "completed"
    assert run.result == {"isSuccess": True}
    assert run.steps["order.approved"]["approver"] == "bo"
    assert run.events[-1].text == "result {'isSuccess': True}"
    [hook] = env.webhooks
    assert (hook.url, hook.status) == ("https://hooks.example.com/fulfilment", 200)
    assert hook.body == {"orderId": "o-1", "approvedBy": "bo"}
    assert hook.idempotency_key and hook.sent_at == datetime(2030, 1, 1, 10, 0, tzinfo=UTC)


def test_advance_fires_the_timeout_at_its_instant(make_env: MakeEnv) -> None:
    env = make_env(modules=["sample_workflows"], now=T0)
    env.put_event(tenant=TENANT_A, type="order.placed", payload=ORDER)
    env.advance("P2DT23H")
    assert env.run(tenant=TENANT_A, workflow="order-approval", key="o-1").status == "waiting"
    env.advance("P7D")
    run = env.run(tenant=TENANT_A, workflow="order-approval", key="o-1")
    assert (run.status, run.reason) == ("failed", "returned_failure")
    assert run.result == {"isSuccess": False, "error": "not approved within 3 days"}
    assert run.steps["order.approved"] is None
    resumed = next(e for e in run.events if e.type == "workflow.step.resumed")
    assert resumed.recorded_at == datetime(2030, 1, 4, 9, 0, tzinfo=UTC)
    assert env.now == datetime(2030, 1, 11, 8, 0, tzinfo=UTC)


def test_timers_and_cron_runs_fire_on_the_way(make_env: MakeEnv) -> None:
    env = make_env(modules=["sample_workflows"], now="2030-01-01T08:00:00Z")
    signup = {"userId": "active-1", "email": "bo@example.com"}
    env.put_event(tenant=TENANT_A, type="user.signed-up", payload=signup)
    env.advance("P1D")
    onboarding = env.run(tenant=TENANT_A, workflow="user-onboarding", key="onboarding:active-1")
    assert onboarding.steps == {"engaged": True}
    assert [m.subject for m in env.mails] == ["Welcome!", "Engagement tips"]
    reports = env.runs(tenant=TENANT_A, workflow="daily-report")
    assert [r.status for r in reports] == ["completed"]
    daily = [w for w in env.webhooks if w.url.endswith("/daily-report")]
    assert [w.body for w in daily] == [{"scheduledAt": "2030-01-01T09:00:00.000000Z"}]


def test_a_stubbed_webhook_answer_is_retried_or_fails_as_in_aws(make_env: MakeEnv) -> None:
    env = make_env(modules=["sample_workflows"], now=T0)
    env.stub_webhook("https://hooks.example.com/flaky", 503, None, 200)
    env.stub_webhook("https://hooks.example.com/gone*", 410)
    for name in ("flaky", "gone/1"):
        payload = {"data": {"n": name}, "webhookUrl": f"https://hooks.example.com/{name}"}
        env.put_event(tenant=TENANT_A, type="data.processed", payload=payload)
    env.advance("PT1H")
    flaky = [w.status for w in env.webhooks if w.url.endswith("/flaky")]
    gone = [w.status for w in env.webhooks if w.url.endswith("/gone/1")]
    assert flaky == [503, None, 200]
    assert gone == [410]
    assert {w.idempotency_key for w in env.webhooks if w.url.endswith("/flaky")} == {
        env.webhooks[0].idempotency_key
    }


def test_the_ssrf_guard_judges_webhook_urls_as_in_aws(make_env: MakeEnv) -> None:
    env = make_env(modules=["sample_workflows"], now=T0)
    for url in ("http://hooks.example.com/plain", "https://10.0.0.8/internal"):
        env.put_event(
            tenant=TENANT_A, type="data.processed", payload={"data": {}, "webhookUrl": url}
        )
    env.advance("PT1H")
    assert env.webhooks == []  # refused before any request


def test_each_environment_has_a_database_of_its_own(make_env: MakeEnv) -> None:
    first = make_env(modules=["sample_workflows"], now=T0)
    second = make_env(modules=["sample_workflows"], now=T0)
    first.put_event(tenant=TENANT_A, type="order.placed", payload=ORDER)
    assert first.run(tenant=TENANT_A, workflow="order-approval").status == "waiting"
    with pytest.raises(RunNotFound):
        second.run(tenant=TENANT_A, workflow="order-approval", key="o-1")
    with pytest.raises(RunNotFound):
        first.run(tenant=TENANT_B, workflow="order-approval", key="o-1")
    assert second.mails == []


def test_closing_the_environment_drops_its_database(pg_server_url: str) -> None:
    env = WorkflowTestEnv(modules=["sample_workflows"], database_url=pg_server_url)
    with env:
        url = env.store.dsn
    from workflow_runner.errors import StoreError
    from workflow_runner.store import connect

    with pytest.raises(StoreError):
        connect(url)


def test_workflows_can_be_given_directly(make_env: MakeEnv) -> None:
    inline = define_workflow(
        name="kit-inline",
        trigger=on_event("kit.poke"),
        register=False,
        steps=lambda s: [
            s.compute("n", lambda ctx: ctx.event.payload["n"] * 2),
            s.wait(for_="PT5M"),
            s.return_({"isSuccess": True}),
        ],
    )
    env = make_env(workflows=[inline], now=T0)
    env.put_event(tenant=TENANT_A, type="kit.poke", payload={"n": 21})
    run = env.run(tenant=TENANT_A, workflow="kit-inline")
    assert (run.status, run.steps) == ("waiting", {"n": 42})
    env.advance("PT5M")
    assert env.run(tenant=TENANT_A, workflow="kit-inline").status == "completed"


def test_modules_that_do_not_load_or_define_nothing_are_named(pg_server_url: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match="no_such_flows_xyz"):
        WorkflowTestEnv(modules=["no_such_flows_xyz"], database_url=pg_server_url)
    with pytest.raises(WorkflowDefinitionError, match="'json' registers no workflow"):
        WorkflowTestEnv(modules=["json"], database_url=pg_server_url)
    with pytest.raises(TypeError, match="list of module names"):
        WorkflowTestEnv(modules="sample_workflows", database_url=pg_server_url)  # type: ignore[arg-type]


def test_without_a_template_or_outside_with_it_says_what_is_missing(
    tmp_path: Path, pg_server_url: str
) -> None:
    with pytest.raises(NotConfigured, match=r"template\.yaml"):
        WorkflowTestEnv(modules=["sample_workflows"], template=tmp_path / "template.yaml")
    env = WorkflowTestEnv(modules=["sample_workflows"], database_url=pg_server_url)
    with pytest.raises(NotConfigured, match="context manager"):
        env.put_event(tenant=TENANT_A, type="order.placed", payload=ORDER)


def _approval(version: int = 1, subject: str = "Thanks", wait_first: bool = True) -> object:
    return define_workflow(
        name="kit-approval",
        version=version,
        trigger=on_event("kit.order"),
        idempotency_key=lambda event: event.payload["id"],
        steps=lambda s: [
            *([s.wait(for_="P1D")] if wait_first else []),
            s.mail_send(to="ops@example.com", subject=subject, body="-"),
            *([] if wait_first else [s.wait(for_="P1D")]),
        ],
        register=False,
    )


def test_redeploying_a_copy_edit_keeps_the_waiting_runs_going_on_the_new_text(
    make_env: MakeEnv,
) -> None:
    env = make_env(workflows=[_approval()], now=T0)
    for key in ("a", "b"):
        env.put_event(tenant=TENANT_A, type="kit.order", payload={"id": key})
    assert [p.fails for p in env.pinned_definitions()] == [False]

    assert env.redeploy(workflows=[_approval(subject="Thank you")]) == []

    env.advance("P1D")
    run = env.run(tenant=TENANT_A, workflow="kit-approval", key="a")
    assert run.status == "completed"
    assert [m.subject for m in env.mails] == ["Thank you", "Thank you"]


def test_redeploying_a_structural_edit_without_the_old_code_names_the_runs_it_would_fail(
    make_env: MakeEnv,
) -> None:
    env = make_env(workflows=[_approval()], now=T0)
    for key in ("a", "b"):
        env.put_event(tenant=TENANT_A, type="kit.order", payload={"id": key})

    [failing] = env.redeploy(workflows=[_approval(wait_first=False)], keep_previous=False)

    assert (failing.workflow_name, failing.version, failing.runs) == ("kit-approval", 1, 2)
    assert failing.steps == {"step 0 (wait)": 2}
    assert "edited in place" in failing.verdict
    assert failing.differences == {"step 0 (wait)": "v1: step 0 (wait): wait → mail.send"}
    env.advance("P1D")
    run = env.run(tenant=TENANT_A, workflow="kit-approval", key="a")
    assert (run.status, run.reason) == ("failed", "workflow_definition_changed")
    assert run.error.endswith(
        "It resumes on no registered definition: v1: step 0 (wait): wait → mail.send."
    )


def test_redeploying_a_new_version_next_to_the_old_keeps_waiting_runs(make_env: MakeEnv) -> None:
    env = make_env(workflows=[_approval()], now=T0)
    env.put_event(tenant=TENANT_A, type="kit.order", payload={"id": "a"})

    assert env.redeploy(workflows=[_approval(), _approval(version=2, subject="New")]) == []

    env.put_event(tenant=TENANT_A, type="kit.order", payload={"id": "b"})
    pinned = {(p.version, p.resumes_on, p.runs) for p in env.pinned_definitions()}
    assert pinned == {(1, 1, 1), (2, 2, 1)}
    env.advance("P1D")
    assert sorted(m.subject for m in env.mails) == ["New", "Thanks"]
    assert env.pinned_definitions() == []


def _charging() -> Any:
    return define_workflow(
        name="kit-charge",
        trigger=on_event("kit.charge"),
        steps=lambda s: [
            s.branch(
                if_=True,
                on_true=[
                    s.task(
                        "charge",
                        lambda ctx: {"real": True},
                        retry=RetryPolicy(max_attempts=3, base="PT10S", jitter="none"),
                    )
                ],
            ),
            s.return_({"isSuccess": True, "charge": Steps["charge"]}),
        ],
        register=False,
    )


def test_a_stubbed_task_function_runs_instead_of_the_real_one_with_its_retries(
    make_env: MakeEnv,
) -> None:
    original = _charging()
    env = make_env(workflows=[original], now=T0)
    attempts: list[tuple[int, str | None]] = []

    def provider(ctx: StepContext) -> dict[str, bool]:
        attempts.append((ctx.workflow.retry_attempt, ctx.workflow.task_key))
        if len(attempts) == 1:
            raise ConnectionError("provider down")
        return {"real": False}

    env.stub_task("charge", provider)
    env.put_event(tenant=TENANT_A, type="kit.charge", payload={})
    assert env.run(tenant=TENANT_A, workflow="kit-charge").status == "waiting"
    env.advance("PT10S")

    run = env.run(tenant=TENANT_A, workflow="kit-charge")
    assert (run.status, run.result) == ("completed", {"isSuccess": True, "charge": {"real": False}})
    assert [a for a, _ in attempts] == [1, 2]
    assert attempts[0][1] is not None and attempts[0][1] == attempts[1][1]  # one task key
    assert run.definition_fingerprint == original.fingerprint  # still pinned to the real one
    with pytest.raises(ValueError, match="no registered workflow has a task 'refund'"):
        env.stub_task("refund", provider)


def test_a_bad_value_from_a_resolver_fails_the_run_naming_the_argument_not_the_value(
    make_env: MakeEnv,
) -> None:
    deadline = define_workflow(
        name="kit-deadline",
        trigger=on_event("kit.wait"),
        awaits={"done": "kit.done"},
        steps=lambda s: [s.wait_for_event("done", timeout=Event.payload["deadline"])],
        register=False,
    )
    env = make_env(workflows=[deadline], now=T0)
    env.put_event(tenant=TENANT_A, type="kit.wait", payload={"deadline": "3 days"})
    env.put_event(tenant=TENANT_A, type="kit.wait", payload={"other": "x"}, event_id="e-2")
    bad, missing = sorted(env.runs(tenant=TENANT_A), key=lambda r: r.reason or "")
    assert (bad.status, bad.reason) == ("failed", "invalid_argument:timeout")
    assert bad.error == "workflow step failed (InvalidArgument)"
    assert "3 days" not in str([e.payload for e in bad.events])
    assert (missing.status, missing.reason) == (
        "failed",
        "unresolved_reference:event.payload.deadline",
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (nested(100_000), "put_event(payload=...) is nested deeper than 99 levels (the limit)"),
        (
            ORDER | {"blob": "x" * 300_000},
            "put_event(payload=...) is 300063 bytes, over the 262144-byte limit",
        ),
    ],
    ids=["100000-levels", "300-kb"],
)
def test_put_event_refuses_a_payload_too_deep_or_too_large_naming_the_argument(
    make_env: MakeEnv, payload: dict[str, Any], message: str
) -> None:
    env = make_env(modules=["sample_workflows"], now=T0)
    with pytest.raises(InvalidInput) as refused:
        env.put_event(tenant=TENANT_A, type="order.placed", payload=payload)
    assert str(refused.value) == message
    assert env.runs(tenant=TENANT_A) == []


def test_put_event_takes_a_payload_as_deep_as_an_event_detail_may_be(make_env: MakeEnv) -> None:
    """99 levels: the event around the detail is the hundredth."""
    env = make_env(modules=["sample_workflows"], now=T0)
    env.put_event(tenant=TENANT_A, type="order.placed", payload=ORDER | {"deep": nested(98)})
    assert env.run(tenant=TENANT_A, workflow="order-approval", key="o-1").status == "waiting"


def test_a_task_with_base_two_seconds_is_retried_two_seconds_later(make_env: MakeEnv) -> None:
    """No jitter unless asked for: a first retry with base="PT2S" came after 0.36 s."""
    flaky = define_workflow(
        name="kit-flaky",
        trigger=on_event("kit.flaky"),
        register=False,
        steps=lambda s: [
            s.task("call", lambda ctx: {"ok": True}, retry=RetryPolicy(base="PT2S")),
            s.return_({"isSuccess": True}),
        ],
    )
    env = make_env(workflows=[flaky], now=T0)
    calls: list[datetime] = []

    def partner(ctx: StepContext) -> dict[str, bool]:
        calls.append(ctx.now)
        if len(calls) < 3:
            raise ConnectionError("partner down")
        return {"ok": True}

    env.stub_task("call", partner)
    env.put_event(tenant=TENANT_A, type="kit.flaky", payload={})
    env.advance("PT1M")
    assert env.run(tenant=TENANT_A, workflow="kit-flaky").status == "completed"
    assert [(c - calls[0]).total_seconds() for c in calls] == [0.0, 2.0, 6.0]


def test_a_misspelt_workflow_key_or_task_is_named_with_the_closest_names(
    make_env: MakeEnv,
) -> None:
    env = make_env(modules=["sample_workflows"], now=T0)
    env.put_event(tenant=TENANT_A, type="order.placed", payload=ORDER)
    with pytest.raises(UnknownWorkflow) as typo:
        env.run(tenant=TENANT_A, workflow="order-aproval", key="o-1")
    assert "no workflow named 'order-aproval'" in str(typo.value)
    assert "did you mean 'order-approval'?" in str(typo.value)
    with pytest.raises(RunNotFound) as other_key:
        env.run(tenant=TENANT_A, workflow="order-approval", key="o-2")
    assert "no run of 'order-approval' with key 'o-2'" in str(other_key.value)
    assert "did you mean 'o-1'?" in str(other_key.value)
    with pytest.raises(RunNotFound, match=r"tenant .* has no runs of 'order-approval'"):
        env.run(tenant=TENANT_B, workflow="order-approval", key="o-1")
    with pytest.raises(ValueError, match="did you mean 'stock'\\?") as task:
        env.stub_task("stok", lambda ctx: 1)
    assert "'stock')" in str(task.value)  # the last of the task keys listed


def test_put_event_says_what_is_wrong_with_its_arguments(make_env: MakeEnv) -> None:
    env = make_env(modules=["sample_workflows"], now=T0)
    with pytest.raises(InvalidInput, match=r"put_event: payload must be a JSON object .*list"):
        env.put_event(tenant=TENANT_A, type="order.placed", payload=["x"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="put_event: tenant must be a UUID, got 't1'"):
        env.put_event(tenant="t1", type="order.placed", payload=ORDER)
    with pytest.warns(UserWarning, match="is ignored; did you mean 'order.placed'"):
        env.put_event(tenant=TENANT_A, type="order.placd", payload=ORDER)
    assert env.runs(tenant=TENANT_A) == []


def test_a_task_result_that_is_not_json_fails_the_run_with_result_not_storable(
    make_env: MakeEnv,
) -> None:
    paid = define_workflow(
        name="kit-paid",
        trigger=on_event("kit.paid"),
        register=False,
        steps=lambda s: [
            s.task("charge", lambda ctx: {"paidAt": datetime(2030, 1, 1, tzinfo=UTC)}),
            s.return_({"isSuccess": True}),
        ],
    )
    env = make_env(workflows=[paid], now=T0)
    env.put_event(tenant=TENANT_A, type="kit.paid", payload={})
    run = env.run(tenant=TENANT_A, workflow="kit-paid")
    assert (run.status, run.reason) == ("failed", "result_not_storable")
    assert run.error == "workflow step failed (ResultNotStorable)"  # stored: no raw text


def test_the_kit_shows_the_error_text_the_stored_run_never_carries(make_env: MakeEnv) -> None:
    def refuse(ctx: StepContext) -> None:
        raise ValueError("the partner said no to ada@example.com")

    refusing = define_workflow(
        name="kit-refusing",
        trigger=on_event("kit.refuse"),
        register=False,
        steps=lambda s: [
            s.task("quote", lambda ctx: {"at": datetime(2030, 1, 1, tzinfo=UTC)}, catch=True),
            s.compute("answer", refuse),
        ],
    )
    env = make_env(workflows=[refusing], now=T0)
    env.put_event(tenant=TENANT_A, type="kit.refuse", payload={})
    run = env.run(tenant=TENANT_A, workflow="kit-refusing")
    assert run.error == "workflow step failed (ValueError)"
    assert run.error_detail == "ValueError: the partner said no to ada@example.com"
    assert any(
        "the result of task 'quote' is not JSON: .at is a datetime.datetime" in line
        for line in run.log
    ), run.log
    assert "ada@example.com" not in str([e.payload for e in run.events])
