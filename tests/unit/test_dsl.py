"""Workflow definitions: validation, run ids, idempotency keys and fingerprints."""

from __future__ import annotations

import uuid

import pytest
from workflow_runner import (
    DomainEvent,
    RetryPolicy,
    define_workflow,
    on_cron,
    on_event,
    run_id_for,
)
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.definition.dsl import (
    RUN_ID_NAMESPACE,
    Retry,
    Task,
    Wait,
    WaitForEvent,
)
from workflow_runner.errors import WorkflowDefinitionError


def _event(payload: dict[str, object]) -> DomainEvent:
    return DomainEvent(id="e1", type="demo.fired", payload=payload, tenant_id="t")


def test_run_id_is_uuid5_of_name_and_key_in_the_seed_namespace() -> None:
    assert str(RUN_ID_NAMESPACE) == "1f8a6c3e-7d2b-4a91-9e3f-5c8b2a41d6f0"
    expected = uuid.uuid5(uuid.UUID("1f8a6c3e-7d2b-4a91-9e3f-5c8b2a41d6f0"), "wf|k1")
    assert run_id_for("wf", "k1") == str(expected)
    assert run_id_for("wf", "k1") != run_id_for("wf", "k2")


def test_idempotency_key_accepts_function_string_or_none() -> None:
    by_fn = define_workflow(
        name="k-fn",
        trigger=on_event("demo.fired"),
        register=False,
        idempotency_key=lambda e: f"id:{e.payload['x']}",
        steps=lambda s: [s.return_()],
    )
    static = define_workflow(
        name="k-static",
        trigger=on_event("demo.fired"),
        register=False,
        idempotency_key="singleton",
        steps=lambda s: [s.return_()],
    )
    none = define_workflow(
        name="k-none", trigger=on_event("demo.fired"), register=False, steps=lambda s: [s.return_()]
    )
    assert by_fn.key_for(_event({"x": "abc"})) == "id:abc"
    assert static.key_for(_event({})) == "singleton"
    assert none.key_for(_event({})) is None


def test_idempotency_key_returning_a_non_string_is_rejected() -> None:
    wf = define_workflow(
        name="k-bad",
        trigger=on_event("demo.fired"),
        register=False,
        idempotency_key=lambda e: {"not": "a key"},
        steps=lambda s: [s.return_()],
    )
    with pytest.raises(WorkflowDefinitionError, match="idempotency_key returned dict"):
        wf.key_for(_event({}))


def _return_only(name: str, event_type: str = "x") -> str:
    return define_workflow(
        name=name,
        trigger=on_event(event_type),
        register=False,
        steps=lambda s: [s.return_({"isSuccess": True})],
    ).fingerprint


def test_fingerprint_is_stable_for_the_same_definition() -> None:
    assert _return_only("wf") == _return_only("wf")
    assert len(_return_only("wf")) == 64


def test_fingerprint_changes_when_the_steps_change() -> None:
    a = _return_only("wf")
    b = define_workflow(
        name="wf",
        trigger=on_event("x"),
        register=False,
        steps=lambda s: [s.compute("noop", lambda ctx: 1), s.return_({"isSuccess": True})],
    ).fingerprint
    assert a != b


def test_fingerprint_changes_when_the_trigger_or_version_changes() -> None:
    assert _return_only("wf", "x") != _return_only("wf", "y")
    v2 = define_workflow(
        name="wf",
        trigger=on_event("x"),
        register=False,
        version=2,
        steps=lambda s: [s.return_({"isSuccess": True})],
    ).fingerprint
    assert v2 != _return_only("wf")


def test_fingerprint_changes_when_a_resolver_body_changes() -> None:
    a = define_workflow(
        name="wf",
        trigger=on_event("x"),
        register=False,
        steps=lambda s: [s.compute("v", lambda ctx: ctx.event.payload["a"])],
    ).fingerprint
    b = define_workflow(
        name="wf",
        trigger=on_event("x"),
        register=False,
        steps=lambda s: [s.compute("v", lambda ctx: ctx.event.payload["b"])],
    ).fingerprint
    assert a != b


def test_wait_for_event_must_name_an_awaited_type() -> None:
    with pytest.raises(WorkflowDefinitionError, match="not declared in awaits"):
        define_workflow(
            name="wf",
            trigger=on_event("x"),
            register=False,
            steps=lambda s: [s.wait_for_event(event="order.approved")],
        )


def test_wait_for_event_accepts_an_awaits_key_and_defaults_result_key_to_the_type() -> None:
    wf = define_workflow(
        name="wf",
        trigger=on_event("x"),
        register=False,
        awaits={"approved": "order.approved"},
        steps=lambda s: [s.wait_for_event(event="approved")],
    )
    step = wf.steps[0]
    assert step.event == "order.approved"  # type: ignore[union-attr]
    assert step.result_key == "order.approved"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: [], "needs at least one step"),
        (lambda s: ["not a step"], "is not a step"),
        (lambda s: [s.wait()], "exactly one of for_= or until="),
        (lambda s: [s.retry(times=0, do=[])], "times must be an integer >= 1"),
        (lambda s: [s.retry(times=2, do=[], backoff="random")], "backoff: must be"),
        (lambda s: [s.retry(times=2, do=[], jitter="some")], "jitter: must be"),
        (lambda s: [s.webhook_send(url="https://x", method="GET")], "method must be"),
        (lambda s: [s.compute("", lambda ctx: 1)], "key must be a non-empty string"),
        (lambda s: [s.branch(if_=True, on_true="x")], "must be a list of steps"),
    ],
)
def test_malformed_definitions_are_rejected_with_a_clear_message(
    build: object, message: str
) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message):
        define_workflow(name="bad", trigger=on_event("x"), register=False, steps=build)  # type: ignore[arg-type]


def test_invalid_duration_is_rejected_at_definition_time() -> None:
    with pytest.raises(
        WorkflowDefinitionError,
        match='bad › step 0 \\(wait\\) › for_: Invalid duration "10 minutes"',
    ):
        define_workflow(
            name="bad",
            trigger=on_event("x"),
            register=False,
            steps=lambda s: [s.wait(for_="10 minutes")],
        )


def test_cron_trigger_is_checked_by_define_workflow_which_names_the_workflow() -> None:
    assert on_cron("0 9 * * *").schedule == "0 9 * * *"
    with pytest.raises(WorkflowDefinitionError) as raised:
        define_workflow(
            name="nightly",
            trigger=on_cron("every day"),
            register=False,
            steps=lambda s: [s.return_()],
        )
    assert str(raised.value).startswith(
        'nightly › trigger (on_cron) › schedule: Invalid cron expression "every day"'
    )


def test_registry_keeps_versions_side_by_side_and_starts_new_runs_on_the_highest() -> None:
    registry = WorkflowRegistry()
    v1 = define_workflow(
        name="wf", trigger=on_event("x"), register=False, steps=lambda s: [s.return_()]
    )
    v2 = define_workflow(
        name="wf",
        trigger=on_event("x"),
        register=False,
        version=2,
        steps=lambda s: [s.compute("a", lambda ctx: 1), s.return_()],
    )
    registry.register(v2)
    registry.register(v1)
    assert registry.latest("wf") is v2
    assert registry.find("wf", v1.fingerprint) is v1
    assert registry.triggered_by("x") == [v2]


def test_registry_answers_change_with_every_register_and_unregister() -> None:
    # triggered_by and latest_all are kept between calls (asked for every trigger
    # event); a register or unregister must never leave an old answer in use.
    registry = WorkflowRegistry()

    def wf(name: str, trigger: str, version: int = 1) -> object:
        return define_workflow(
            name=name,
            trigger=on_event(trigger),
            register=False,
            version=version,
            steps=lambda s: [s.return_()],
        )

    a1, b = wf("a", "x"), wf("b", "x")
    registry.register(a1)
    assert registry.triggered_by("x") == [a1]
    assert registry.latest_all() == [a1]
    registry.register(b)
    assert registry.triggered_by("x") == [a1, b]
    a2 = wf("a", "y", version=2)
    registry.register(a2)  # a's new version moves to another event type
    assert registry.triggered_by("x") == [b]
    assert registry.triggered_by("y") == [a2]
    assert registry.latest_all() == [a2, b]
    registry.unregister("a", 2)
    assert registry.triggered_by("x") == [a1, b]
    assert registry.triggered_by("y") == []
    registry.unregister("b")
    assert registry.triggered_by("x") == [a1]
    assert registry.latest_all() == [a1]
    # What callers get is theirs to change: the kept answer stays as it was.
    registry.triggered_by("x").clear()
    registry.latest_all().clear()
    assert registry.triggered_by("x") == [a1]
    assert registry.latest_all() == [a1]


def test_define_workflow_registers_in_the_default_registry_when_asked() -> None:
    from workflow_runner.definition import default_registry

    wf = define_workflow(
        name="registered-by-default-test", trigger=on_event("x"), steps=lambda s: [s.return_()]
    )
    try:
        assert default_registry().find(wf.name, wf.fingerprint) is wf
    finally:
        default_registry().unregister(wf.name)


def test_load_workflow_modules_names_a_module_it_cannot_import() -> None:
    from workflow_runner.definition import load_workflow_modules

    with pytest.raises(WorkflowDefinitionError, match="no_such_module_xyz"):
        load_workflow_modules({"WORKFLOW_MODULES": "sample_workflows, no_such_module_xyz"})


def test_durations_in_definitions_take_both_spellings_and_are_stored_as_iso() -> None:
    """One duration grammar for definitions too; what is stored (and hashed) stays
    ISO-8601, so readers of an earlier release and fingerprints of ISO inputs see no
    change."""
    short = define_workflow(
        name="short",
        trigger=on_event("a"),
        awaits={"b": "b"},
        register=False,
        retention="90d",
        steps=lambda s: [
            s.wait(for_="6h"),
            s.wait_for_event("b", timeout="3d", lookback="90s"),
            s.retry(times=2, base="2s", cap="1m", do=[s.compute("c", lambda ctx: 1)]),
            s.task("t", lambda ctx: 1, timeout="30s", retry=RetryPolicy(base="2s", cap="5m")),
        ],
    )
    wait, event, retry, task = short.steps
    assert isinstance(wait, Wait) and wait.for_ == "PT6H"
    assert isinstance(event, WaitForEvent) and (event.timeout, event.lookback) == ("P3D", "PT1M30S")
    assert isinstance(retry, Retry) and (retry.base, retry.cap) == ("PT2S", "PT1M")
    assert isinstance(task, Task) and task.timeout == "PT30S"
    assert (task.retry.base, task.retry.cap) == ("PT2S", "PT5M")
    assert task.retry.to_json()["base"] == "PT2S"
