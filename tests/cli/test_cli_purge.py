"""`wfr purge` against real PostgreSQL: a dry run counts and writes nothing, a purge
deletes settled runs past their retention, bad input writes nothing."""

from __future__ import annotations

from cli_support import TENANT, Cli, send, table_count
from workflow_runner.store import Store

# inventory-sync completes in its first pass (on 2026-01-05), its webhook not delivered
# yet; user-signed-up waits.
SYNC = {"sku": "A-1", "revision": 1}
SIGNUP = {"userId": "active-ada", "email": "ada@example.com"}
LATER = "2026-03-01T00:00:00Z"


def _deliver(store: Store) -> None:
    """The webhook delivered (as the dispatcher would mark it): its run may go."""
    store.conn.execute(
        "UPDATE dispatch_outbox SET status = 'dispatched', request = NULL, settled_at = now()"
    )


def _statuses(store: Store) -> list[str]:
    return sorted(r.status for r in store.runs.for_tenant(TENANT))


def test_purge_dry_run_then_purge_end_to_end(cli: Cli, store: Store) -> None:
    send(store, "inventory.changed", SYNC)
    send(store, "user.signed-up", SIGNUP)
    undelivered = cli("purge", "--dry-run", "--now", LATER, "--json")
    assert undelivered.code == 0 and undelivered.json()["runs"] == 0  # a pending webhook
    _deliver(store)
    events_before = table_count(store, "wf_events")

    dry = cli("purge", "--dry-run", "--now", LATER, "--json")

    assert dry.code == 0, dry.err
    assert dry.json()["dryRun"] is True and dry.json()["runs"] == 1
    assert table_count(store, "wf_events") == events_before
    assert _statuses(store) == ["completed", "waiting"]

    done = cli("purge", "--now", LATER)

    assert done.code == 0, done.err
    assert done.out.startswith("purged 1 run(s)")
    assert _statuses(store) == ["waiting"]
    assert table_count(store, "wf_events") < events_before
    assert cli("purge", "--now", LATER, "--json").json()["runs"] == 0


def test_purge_follows_run_retention_and_older_than(cli: Cli, store: Store) -> None:
    send(store, "inventory.changed", SYNC)
    _deliver(store)
    kept = cli("purge", "--now", LATER, env={"RUN_RETENTION": "forever"})
    assert kept.code == 0 and _statuses(store) == ["completed"]
    soon = "2026-01-05T12:00:00Z"  # three hours after it completed
    assert cli("purge", "--now", soon, "--json").json()["runs"] == 0
    assert cli("purge", "--now", soon, "--older-than", "2h", "--json").json()["runs"] == 1


def test_purge_refuses_bad_input_and_writes_nothing(cli: Cli, store: Store) -> None:
    send(store, "inventory.changed", SYNC)
    _deliver(store)
    for args, message in (
        (["--older-than", "10m"], "minimum retention"),
        (["--older-than", "soon"], "--older-than"),
        (["--batch", "0"], "batch size"),
        (["--max-batches", "0"], "max batches"),
    ):
        result = cli("purge", "--now", LATER, *args)
        assert result.code == 2 and message in result.err, (args, result.err)
    bad_env = cli("purge", "--now", LATER, env={"RUN_RETENTION": "P1"})
    assert bad_env.code == 2 and "RUN_RETENTION" in bad_env.err
    assert _statuses(store) == ["completed"]
