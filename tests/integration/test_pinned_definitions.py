"""Before a deploy: which waiting runs would the new code's definitions fail? (invariant 7,
`wfr doctor` and the test kit's `redeploy`)."""

from __future__ import annotations

from datetime import datetime, timedelta

from workflow_runner import ManualClock, define_workflow, on_event
from workflow_runner.definition import WorkflowDefinition, WorkflowRegistry
from workflow_runner.definition.hosts import RESUME_RUN, STEP_DISPATCHER, register_hosts
from workflow_runner.engine.doctor import check_kept_versions, check_pinned_definitions
from workflow_runner.engine.pinning import pinned_definitions, stranded_runs
from workflow_runner.store import Store

from tests.support import TENANT_A, TENANT_B, resume_due, trigger


def _flow(
    version: int = 1, subject: str = "Thanks", first: str = "wait", pinning: str = "shape"
) -> WorkflowDefinition:
    return define_workflow(
        name="pin-flow",
        version=version,
        trigger=on_event("pin.start"),
        idempotency_key=lambda event: event.payload["id"],
        awaits={"ok": "pin.ok"},
        steps=lambda s: [
            s.wait(for_="P1D") if first == "wait" else s.compute("first", lambda ctx: 1),
            s.wait_for_event("pin.ok", timeout="P3D"),
            s.mail_send(to="ops@example.com", subject=subject, body="-"),
        ],
        register=False,
        pinning=pinning,
    )


def _registry(*definitions: WorkflowDefinition) -> WorkflowRegistry:
    registry = WorkflowRegistry()
    for definition in definitions:
        registry.register(definition)
    return registry


def _start(store: Store, registry: WorkflowRegistry, now: datetime) -> None:
    for tenant, key in ((TENANT_A, "a"), (TENANT_A, "b"), (TENANT_B, "c")):
        trigger(store, registry, "pin.start", {"id": key}, now, tenant=tenant)


def test_runs_on_a_registered_definition_resume(store: Store, clock: ManualClock) -> None:
    now = clock.now()
    v1 = _flow()
    _start(store, _registry(v1), now)
    [pinned] = pinned_definitions(store, _registry(v1))
    assert (pinned.runs, pinned.tenants, pinned.version, pinned.resumes_on) == (3, 2, 1, 1)
    assert pinned.steps == {"step 0 (wait)": 3}
    check = check_pinned_definitions(store, _registry(v1), None)
    assert (check.status, check.items) == ("ok", [])
    assert check.summary == (
        "3 waiting run(s) on 1 definition(s): 3 resume on their own definition, "
        "0 on one whose shape agrees where they wait, 0 stay on a kept version"
    )


def test_a_copy_edit_in_place_resumes_every_waiting_run_by_shape(
    store: Store, clock: ManualClock
) -> None:
    now = clock.now()
    _start(store, _registry(_flow()), now)

    [pinned] = pinned_definitions(store, _registry(_flow(subject="Thank you")))

    assert (pinned.runs, pinned.exact, pinned.by_shape, pinned.failing) == (3, 0, 3, 0)
    assert pinned.verdict == "resume on v1 (its shape agrees where they wait)"
    check = check_pinned_definitions(store, _registry(_flow(subject="Thank you")), None)
    assert check.status == "ok"


def test_a_structural_edit_in_place_fails_every_waiting_run_and_names_the_step(
    store: Store, clock: ManualClock
) -> None:
    now = clock.now()
    _start(store, _registry(_flow()), now)

    check = check_pinned_definitions(store, _registry(_flow(first="compute")), None)

    assert check.status == "problem"
    assert check.summary.startswith("3 waiting run(s) on 1 definition(s) that would fail")
    [item] = check.items
    assert "3 run(s) of pin-flow v1" in item and "2 tenant(s)" in item
    assert "v1 is registered with another definition (edited in place" in item
    assert "v1: step 0 (wait): wait → compute" in item
    assert "waiting at step 0 (wait) ×3" in item
    # The example names a run of the tenant it names.
    example_tenant = item.split("of tenant ")[1]
    example_run = item.split("e.g. run ")[1].split(" ")[0]
    assert store.streams.load(example_tenant, example_run)


def test_runs_of_an_exactly_pinned_definition_fail_on_any_edit(
    store: Store, clock: ManualClock
) -> None:
    now = clock.now()
    _start(store, _registry(_flow(pinning="exact")), now)
    [pinned] = pinned_definitions(store, _registry(_flow(subject="Thank you", pinning="exact")))
    assert pinned.fails and "it is pinned exactly (pinning='exact')" in pinned.verdict


def test_a_removed_workflow_or_version_is_named(store: Store, clock: ManualClock) -> None:
    now = clock.now()
    _start(store, _registry(_flow()), now)
    [gone] = pinned_definitions(store, WorkflowRegistry())
    assert gone.fails and gone.verdict == "will fail: no version of pin-flow is registered"
    [replaced] = pinned_definitions(store, _registry(_flow(version=2, first="compute")))
    assert replaced.verdict == (
        "will fail: their version is no longer registered (registered: v2); "
        "v2: step 0 (wait): wait → compute"
    )
    [same_shape] = pinned_definitions(store, _registry(_flow(version=2)))
    assert same_shape.verdict == "resume on v2 (its shape agrees where they wait)"


def test_an_older_version_kept_next_to_the_new_one_serves_its_runs(
    store: Store, clock: ManualClock
) -> None:
    now = clock.now()
    _start(store, _registry(_flow()), now)
    both = _registry(_flow(), _flow(version=2, subject="New"))
    check = check_pinned_definitions(store, both, None)
    assert check.status == "ok"
    [item] = check.items  # listed: v1 may only be removed once no run waits on it
    assert "3 run(s) of pin-flow v1" in item and "resume on registered v1" in item


def test_the_tenant_filter_and_the_step_breakdown(store: Store, clock: ManualClock) -> None:
    now = clock.now()
    registry = _registry(_flow())
    _start(store, registry, now)

    resume_due(store, registry, now + timedelta(days=1, seconds=1), tenant=TENANT_B)
    [all_tenants] = pinned_definitions(store, registry)
    assert all_tenants.steps == {"step 0 (wait)": 2, "step 1 (wait_for_event)": 1}
    [only_b] = pinned_definitions(store, registry, TENANT_B)
    assert (only_b.runs, only_b.tenants, only_b.example_tenant_id) == (1, 1, TENANT_B)


RESUME_V3 = "arn:aws:lambda:eu-central-1:123456789012:function:stack-ResumeRun-x:3"
DISPATCHER_V3 = "arn:aws:lambda:eu-central-1:123456789012:function:stack-StepDispatcher-y:3"


def _kept_in_v3(store: Store, clock: ManualClock, *definitions: WorkflowDefinition) -> None:
    """Version 3 of both functions registered the definitions (their cold starts)."""
    register_hosts(store, definitions, RESUME_RUN, RESUME_V3, clock.now())
    register_hosts(store, definitions, STEP_DISPATCHER, DISPATCHER_V3, clock.now())


def test_runs_whose_function_version_is_kept_stay_on_it_instead_of_failing(
    store: Store, clock: ManualClock
) -> None:
    _start(store, _registry(_flow()), clock.now())
    _kept_in_v3(store, clock, _flow())
    edited = _registry(_flow(first="compute"))

    [pinned] = pinned_definitions(store, edited)

    assert (pinned.exact, pinned.by_shape, pinned.kept, pinned.failing) == (0, 0, 3, 0)
    assert pinned.kept_on == (RESUME_V3, DISPATCHER_V3)
    assert pinned.verdict == f"stay on kept version {RESUME_V3}"
    check = check_pinned_definitions(store, edited, None, [pinned])
    assert check.status == "ok" and check.summary.endswith("3 stay on a kept version")
    kept = check_kept_versions([pinned])
    assert kept.summary == "3 waiting run(s) stay on 2 kept version(s) until they settle"
    assert kept.items == [
        f"{host}: pin-flow v1 (definition {pinned.fingerprint[:12]}…): "
        "3 waiting run(s), 2 tenant(s)"
        for host in (RESUME_V3, DISPATCHER_V3)
    ]
    stranded = stranded_runs(store, edited)
    assert (stranded.kept, stranded.failing, stranded.failures) == (3, 0, [])
    # Without the kept tier (nothing registered, or told so) they would fail.
    assert pinned_definitions(store, edited, hosts=None)[0].failing == 3


def test_a_workflow_removed_from_the_code_stays_on_its_kept_version(
    store: Store, clock: ManualClock
) -> None:
    _start(store, _registry(_flow()), clock.now())
    _kept_in_v3(store, clock, _flow())
    check = check_pinned_definitions(store, WorkflowRegistry(), None)
    assert check.status == "ok"
    [item] = check.items
    assert "3 run(s) of pin-flow v1" in item and f"stay on kept version {RESUME_V3}" in item


def test_only_the_runs_whose_shape_disagrees_stay_on_the_kept_version(
    store: Store, clock: ManualClock
) -> None:
    registry = _registry(_flow())
    _start(store, registry, clock.now())
    resume_due(store, registry, clock.now() + timedelta(days=1, seconds=1), tenant=TENANT_B)
    _kept_in_v3(store, clock, _flow())
    # The wait for the event becomes a timer: the runs before it resume on the new code,
    # the one waiting at it stays on the kept version.
    timer = define_workflow(
        name="pin-flow",
        trigger=on_event("pin.start"),
        idempotency_key=lambda event: event.payload["id"],
        awaits={"ok": "pin.ok"},
        steps=lambda s: [
            s.wait(for_="P1D"),
            s.wait(for_="P3D"),
            s.mail_send(to="ops@example.com", subject="Thanks", body="-"),
        ],
        register=False,
    )
    [pinned] = pinned_definitions(store, _registry(timer))
    assert (pinned.by_shape, pinned.kept, pinned.failing) == (2, 1, 0)
    assert pinned.verdict == (
        "resume on v1 (its shape agrees where they wait), the others stay on kept version "
        f"{RESUME_V3}"
    )
