"""The console's "Migrate waiting runs to vN": its confirmation shows the dry run (what
would move, what would be refused and why, what else differs) and writes nothing; the
confirmed form, with the CSRF token, migrates and records who did it on each stream."""

from __future__ import annotations

import pytest
from console_support import T0, Client, console
from workflow_runner import DomainEvent, Event, Steps, define_workflow, on_event, run_id_for
from workflow_runner.definition import WorkflowDefinition, WorkflowRegistry
from workflow_runner.engine import ingest_domain_event, project_pending
from workflow_runner.store import Store

from tests.support import TENANT_A, stream_types

ORIGIN = "http://127.0.0.1:8080"
PATH = "/workflows/refund/migrate"


def refund(version: int, inserted: list[str]) -> WorkflowDefinition:
    return define_workflow(
        name="refund",
        version=version,
        trigger=on_event("refund.asked"),
        idempotency_key=Event.payload["id"],
        awaits={"approved": "refund.approved"},
        steps=lambda s: [
            *[s.compute(key, lambda ctx: 1) for key in inserted],
            s.wait_for_event("approved", timeout="P3D", result_key="approval"),
            s.return_({"v": version, "approval": Steps["approval"]}),
        ],
        register=False,
    )


V1, V2, V3 = refund(1, []), refund(2, ["checked"]), refund(3, ["checked", "logged"])


def registry(*definitions: WorkflowDefinition) -> WorkflowRegistry:
    found = WorkflowRegistry()
    for definition in definitions:
        found.register(definition)
    return found


@pytest.fixture
def waiting(store: Store) -> str:
    """A run of refund v1 waiting for its approval (v1 is gone from the console's code)."""
    event = DomainEvent("e-1", "refund.asked", {"id": "r-1"}, TENANT_A, T0, "tests")
    ingest_domain_event(store, event, T0, registry(V1))
    project_pending(store, T0)
    return run_id_for("refund", "r-1")


@pytest.fixture
def actions(db_url: str) -> Client:
    return console(db_url, allow_actions=True, registry=registry(V2, V3))


def test_the_runs_of_a_workflow_and_a_waiting_run_offer_the_migration(
    actions: Client, db_url: str, waiting: str
) -> None:
    runs = actions.get("/", workflow="refund").text
    assert 'href="/workflows/refund/migrate?to=2"' in runs
    assert "Migrate waiting runs to v3" in runs
    assert (
        f'href="/workflows/refund/migrate?to=2&amp;tenant={TENANT_A}"'
        in actions.get(f"/runs/{waiting}").text
    )
    read_only = console(db_url, registry=registry(V2, V3))
    assert 'data-action="migrate"' not in read_only.get("/", workflow="refund").text


def test_the_confirmation_shows_the_dry_run_and_writes_nothing(
    actions: Client, store: Store, waiting: str
) -> None:
    before = stream_types(store, waiting)
    page = actions.get(PATH, to="2", map="0=1")
    assert page.status == 200
    assert "refund → v2: 1 would move, 0 already on v2" in page.text
    assert "step 0: a wait_for_event for &#x27;refund.approved&#x27;" in page.text
    assert "would move" in page.text and "Migrate 1 run(s) to v2" in page.text
    assert "step 0 (wait_for_event): wait_for_event → compute" in page.text  # what else differs
    assert page.csrf()
    assert stream_types(store, waiting) == before


def test_a_refused_run_is_shown_with_why_and_nothing_is_offered(
    actions: Client, waiting: str
) -> None:
    page = actions.get(PATH, to="3", map="0=1")
    assert "refused" in page.text
    assert "v3 step 1 is a compute; the run waits at a wait_for_event" in page.text
    assert "No run would move." in page.text and 'id="confirm"' not in page.text


def test_the_confirmed_migration_moves_the_run_and_records_who_asked(
    actions: Client, store: Store, waiting: str
) -> None:
    token = actions.get(PATH, to="2", map="0=1").csrf()
    form = {"csrf": token, "to": "2", "map": "0=1", "tenant": "", "reason": "checked first"}
    done = actions.post(PATH, form, origin=ORIGIN)
    assert done.status == 200
    assert "refund → v2: 1 moved, 0 already on v2" in done.text
    events = store.streams.load(TENANT_A, waiting)
    assert [e.type for e in events][-2:] == ["workflow.operator-action", "workflow.run-migrated"]
    action = events[-2].payload
    assert action["action"] == "migrate" and action["reason"] == "checked first"
    assert action["by"].startswith("console (")
    again = actions.get(PATH, to="2", map="0=1")
    assert "refund → v2: 1 already on v2" in again.text
    run = actions.get(f"/runs/{waiting}", tenant=TENANT_A).text
    assert "moved from step 0 to step 1 of v2" in run  # its timeline
    assert "(migrated to v2)" in run  # its graph's current step is the new one


def test_posts_without_the_token_from_elsewhere_or_read_only_write_nothing(
    actions: Client, db_url: str, store: Store, waiting: str
) -> None:
    before = stream_types(store, waiting)
    form = {"to": "2", "map": "0=1"}
    assert actions.post(PATH, form, origin=ORIGIN).status == 403
    token = actions.get(PATH, to="2", map="0=1").csrf()
    assert actions.post(PATH, {**form, "csrf": token}, origin="https://evil.example").status == 403
    read_only = console(db_url, registry=registry(V2))
    assert read_only.post(PATH, {**form, "csrf": token}, origin=ORIGIN).status == 403
    assert stream_types(store, waiting) == before


def test_an_unknown_version_or_a_bad_mapping_is_a_bad_request(
    actions: Client, waiting: str
) -> None:
    version = actions.get(PATH, to="9")
    assert version.status == 400 and "refund has no version 9 registered" in version.text
    mapping = actions.get(PATH, to="2", map="0=x")
    assert mapping.status == 400 and "is not a step place" in mapping.text
