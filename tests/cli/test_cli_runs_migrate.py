"""`wfr runs migrate`: move a workflow's waiting runs onto another registered version;
exit 0 when every selected run moved (or for a dry run), 1 when one was refused or lost
its race, 2 for bad usage."""

from __future__ import annotations

from collections.abc import Iterator

import migrate_workflows
import pytest
from cli_support import T0, TENANT, Cli, table_count
from test_docs_commands import COMMANDS as DOCS_COMMANDS
from test_docs_commands import test_a_shown_command_parses as shown_command_parses
from workflow_runner import DomainEvent, run_id_for
from workflow_runner.definition import WorkflowRegistry, default_registry
from workflow_runner.engine import ingest_domain_event, project_pending
from workflow_runner.store import Store

from tests.support import TENANT_B, stream_types

ENV = {"WORKFLOW_MODULES": "migrate_workflows"}
NOW = "2026-01-05T10:00:00Z"


@pytest.fixture(autouse=True)
def _checkout_versions() -> Iterator[None]:
    """Versions 2 and 3 are in the default registry for these tests only: other tests of
    the process (doctor's template check) see the registry without them."""
    for definition in (migrate_workflows.V2, migrate_workflows.V3):
        default_registry().register(definition)
    yield
    default_registry().unregister("checkout")


def start(store: Store, key: str, tenant: str = TENANT) -> str:
    registry = WorkflowRegistry()
    registry.register(migrate_workflows.V1)
    event = DomainEvent(f"e-{key}", "checkout.started", {"id": key}, tenant, T0, "tests")
    ingest_domain_event(store, event, T0, registry)
    project_pending(store, T0)
    return run_id_for("checkout", key)


def migrate(cli: Cli, *args: str) -> object:
    return cli("runs", "migrate", "--workflow", "checkout", "--now", NOW, *args, env=ENV)


def test_a_dry_run_lists_what_would_move_and_what_else_differs_and_writes_nothing(
    cli: Cli, store: Store
) -> None:
    run_id = start(store, "c-1")
    events = table_count(store, "wf_events")
    result = migrate(cli, "--to-version", "2", "--map", "0=1", "--dry-run")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "dry run: nothing was written"
    assert lines[1] == "checkout → v2: 1 would move, 0 already on v2"
    assert lines[2].split() == ["RUN", "TENANT", "WAITS", "AT", "TO", "OUTCOME"]
    assert lines[3].startswith(f"{run_id[:8]}  {TENANT[:8]}  v1 step 0: a wait_for_event")
    assert lines[3].endswith("step 1  would move")
    assert "what else differs from v2, where the runs wait now:" in lines
    assert "  v1 step 0 (1 run(s)): step 0 (wait_for_event): wait_for_event → compute" in lines
    assert table_count(store, "wf_events") == events


def test_the_runs_move_and_each_stream_says_who_moved_it_and_why(cli: Cli, store: Store) -> None:
    run_id = start(store, "c-1")
    result = migrate(cli, "--to-version", "2", "--map", "0=1", "--reason", "plan step", "--json")
    assert result.code == 0, result.err
    [run] = result.json()["runs"]
    assert (run["runId"], run["outcome"], run["toPath"]) == (run_id, "moved", [{"i": 1}])
    assert stream_types(store, run_id)[-2:] == [
        "workflow.operator-action",
        "workflow.run-migrated",
    ]
    action = store.streams.load(TENANT, run_id)[-2].payload
    assert action["action"] == "migrate" and action["reason"] == "plan step"
    assert action["by"].startswith("cli (")
    again = migrate(cli, "--to-version", "2", "--map", "0=1")
    assert again.code == 0
    assert again.out.splitlines()[0] == "checkout → v2: 1 already on v2"


def test_a_refused_run_exits_1_with_why_and_nothing_is_written_for_it(
    cli: Cli, store: Store
) -> None:
    run_id = start(store, "c-1")
    before = stream_types(store, run_id)
    result = migrate(cli, "--to-version", "3", "--map", "0=1")
    assert result.code == 1
    assert (
        f"  {run_id[:8]} refused: v3 step 1 is a wait; the run waits at a wait_for_event "
        "for 'checkout.paid' under 'payment'"
    ) in result.out.splitlines()
    assert stream_types(store, run_id) == before
    assert migrate(cli, "--to-version", "3", "--map", "0=1", "--dry-run").code == 0


def test_only_the_tenant_asked_for_is_migrated(cli: Cli, store: Store) -> None:
    start(store, "c-1")
    other = start(store, "c-2", tenant=TENANT_B)
    result = migrate(cli, "--to-version", "2", "--map", "0=1", "--tenant", TENANT, "--json")
    assert result.code == 0
    assert [r["tenantId"] for r in result.json()["runs"]] == [TENANT]
    assert stream_types(store, other, TENANT_B)[-1] == "workflow.step.waiting-for-event"


def test_bad_usage_exits_2_and_names_what_is_known(
    cli: Cli, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    unknown = cli("runs", "migrate", "--workflow", "chekout", "--to-version", "2", env=ENV)
    assert unknown.code == 2 and "did you mean 'checkout'?" in unknown.err
    version = migrate(cli, "--to-version", "7")
    assert version.code == 2
    assert "checkout has no version 7 registered (registered: v2, v3)" in version.err
    mapping = migrate(cli, "--to-version", "2", "--map", "0=1.0")
    assert mapping.code == 2 and "at different depths" in mapping.err
    missing = cli("runs", "migrate", "--workflow", "checkout", env=ENV)
    assert missing.code == 2 and "required: --to-version" in capsys.readouterr().err


def test_the_site_shows_the_command_and_every_form_it_shows_parses() -> None:
    page = "docs/workflows/changing.md"
    shown = [c for p, c in DOCS_COMMANDS if p == page and c.startswith("wfr runs migrate")]
    assert "wfr runs migrate --workflow checkout --to-version 2 --map 0=1 --dry-run" in shown
    for command in shown:
        shown_command_parses(page, command)
