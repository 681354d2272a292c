"""Actions in the console: read-only by default, CSRF on every POST, recorded on the
run's stream as an operator action, done by the engine's own operations."""

from __future__ import annotations

import pytest
from console_support import Client, console, populate
from workflow_runner.store import Store

from tests.support import TENANT_A


@pytest.fixture
def actions(db_url: str) -> Client:
    return console(db_url, allow_actions=True)


def _count(store: Store) -> int:
    row = store.conn.execute("SELECT count(*) AS n FROM wf_events").fetchone()
    assert row is not None
    return int(row["n"])


def test_read_only_console_shows_no_action_and_refuses_posts(db_url: str, store: Store) -> None:
    runs = populate(store)
    client = console(db_url)
    page = client.get(f"/runs/{runs.ids['order']}")
    assert "data-action" not in page.text and "--allow-actions" in page.text
    assert client.get(f"/runs/{runs.ids['order']}/cancel").status == 403
    before = _count(store)
    refused = client.post(f"/runs/{runs.ids['order']}/cancel", {"tenant": TENANT_A, "csrf": "x"})
    assert refused.status == 403 and _count(store) == before


def test_buttons_follow_the_run_status(actions: Client, store: Store) -> None:
    runs = populate(store)
    waiting = actions.get(f"/runs/{runs.ids['order']}").text
    assert 'data-action="cancel"' in waiting and 'data-action="resume"' in waiting
    assert 'data-action="redrive"' not in waiting
    failed = actions.get(f"/runs/{runs.ids['failed']}").text
    assert 'data-action="redrive"' in failed and 'data-action="cancel"' not in failed
    assert "data-action" not in actions.get(f"/runs/{runs.ids['completed']}").text
    assert actions.get(f"/runs/{runs.ids['completed']}/cancel").status == 409


def test_cancel_is_confirmed_then_recorded_as_an_operator_action(
    actions: Client, store: Store
) -> None:
    runs = populate(store)
    run_id = runs.ids["order"]
    confirm = actions.get(f"/runs/{run_id}/cancel", tenant=TENANT_A)
    assert confirm.status == 200 and "Cancel this run?" in confirm.text
    done = actions.post(
        f"/runs/{run_id}/cancel",
        {"tenant": TENANT_A, "csrf": confirm.csrf(), "reason": "customer asked"},
        origin="http://127.0.0.1:8080",
    )
    assert done.status == 303
    assert done.location == f"/runs/{run_id}?tenant={TENANT_A}&action=cancel&outcome=cancelled"
    events = store.streams.load(TENANT_A, run_id)
    assert [e.type for e in events][-2:] == ["workflow.operator-action", "workflow.run-cancelled"]
    action = events[-2].payload
    assert action["action"] == "cancel" and action["reason"] == "customer asked"
    assert action["by"].startswith("console (")
    assert events[-1].payload["reason"] == "customer asked"
    after = actions.get(f"/runs/{run_id}", tenant=TENANT_A, action="cancel", outcome="cancelled")
    assert "The run was cancelled." in after.text and "status-cancelled" in after.text


def test_posts_without_the_token_or_from_another_site_write_nothing(
    actions: Client, store: Store
) -> None:
    runs = populate(store)
    token = actions.get(f"/runs/{runs.ids['order']}/cancel").csrf()
    before = _count(store)
    path = f"/runs/{runs.ids['order']}/cancel"
    assert actions.post(path, {"tenant": TENANT_A}).status == 403
    assert actions.post(path, {"tenant": TENANT_A, "csrf": token + "x"}).status == 403
    foreign = actions.post(path, {"tenant": TENANT_A, "csrf": token}, origin="https://evil.example")
    assert foreign.status == 403
    assert _count(store) == before
    assert store.runs.get(TENANT_A, runs.ids["order"]).status == "waiting"  # type: ignore[union-attr]


def test_resume_now_moves_a_waiting_run_on(actions: Client, store: Store) -> None:
    runs = populate(store)
    run_id = runs.ids["onboarding"]
    token = actions.get(f"/runs/{run_id}/resume").csrf()
    done = actions.post(f"/runs/{run_id}/resume", {"tenant": TENANT_A, "csrf": token, "step": "1"})
    assert done.status == 303 and "outcome=suspended" in done.location
    types = [e.type for e in store.streams.load(TENANT_A, run_id)]
    assert types[-3:] == [
        "workflow.operator-action",
        "workflow.step.resumed",
        "workflow.step.waiting",
    ]


def test_redrive_of_a_failed_run_and_a_refused_one(actions: Client, store: Store) -> None:
    runs = populate(store)
    token = actions.get(f"/runs/{runs.ids['failed']}/redrive").csrf()
    done = actions.post(f"/runs/{runs.ids['failed']}/redrive", {"tenant": TENANT_A, "csrf": token})
    assert done.status == 303 and "outcome=suspended" in done.location
    types = [e.type for e in store.streams.load(TENANT_A, runs.ids["failed"])]
    assert types[-3:] == [
        "workflow.operator-action",
        "workflow.run-redriven",
        "workflow.retry.scheduled",
    ]
    # A run that is not failed: the redrive is refused and nothing is written, not even
    # the operator action (the confirmation page is bypassed on purpose here).
    before = _count(store)
    refused = actions.post(
        f"/runs/{runs.ids['completed']}/redrive", {"tenant": TENANT_A, "csrf": token}
    )
    assert refused.status == 409 and "only failed runs can be redriven" in refused.text
    assert _count(store) == before
