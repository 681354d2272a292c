"""The statement profile's labels: a statement pg_stat_statements recorded is named after
the engine query it is, whatever its placeholders, comments and layout."""

from __future__ import annotations

from workflow_runner.store.queries import queries

from bench.harness import DEFAULT_BATCHES, LARGEST_BATCHES
from bench.statements import _shape, arguments, name_of


def _named() -> dict[str, str]:
    return {name: _shape(text) for name, text in queries().items()}


def test_a_recorded_statement_is_named_after_its_query() -> None:
    # What pg_stat_statements keeps: numbered placeholders, no comments, other layout.
    recorded = (
        "UPDATE inbox i SET woken_at = coalesce(i.woken_at, $1)\n"
        "    FROM unnest($2::uuid[], $3::text[]) AS q(tenant_id, event_id)\n"
        "    WHERE i.tenant_id = q.tenant_id AND i.event_id = q.event_id"
    )

    assert name_of(recorded, _named()) == "finish_inbox_wakeup"


def test_every_query_names_itself() -> None:
    named = _named()
    wrong = {name for name, text in queries().items() if name_of(text, named) != name}
    # Queries whose text is the same as another's start cannot be told apart; none are.
    assert wrong == set()


def test_a_statement_of_no_query_has_no_name() -> None:
    assert name_of("SELECT count(*) FROM workflow_runs", _named()) == ""
    assert name_of("COMMIT", _named()) == ""


def test_the_event_waits_batch_size_is_the_templates_default_unless_asked() -> None:
    assert arguments(["event_wait", "2000"]).batch == DEFAULT_BATCHES.intake == 10
    # The benchmark's own burst shape (IntakeBatchSize and ResumeBatchSize 100).
    assert arguments(["event_wait", "2000", "--batch", "100"]).batch == LARGEST_BATCHES.resume
