"""The schema that the migrations build equals the declared fresh-install schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from workflow_runner.embedded import database_url
from workflow_runner.errors import StoreError
from workflow_runner.store import apply_migrations, pending_migrations, schema_sql
from workflow_runner.store.migrate import all_migrations

CATALOG_QUERIES = {
    "columns": """
        SELECT table_name, column_name, data_type, is_nullable, column_default
        FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name <> 'schema_migrations'
        ORDER BY table_name, column_name""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = 'public' AND tablename <> 'schema_migrations'
        ORDER BY tablename, indexname""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
        FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace
          AND conrelid::regclass::text <> 'schema_migrations'
        ORDER BY 1, 2""",
}


@pytest.fixture
def empty_db(pg_server_url: str) -> Iterator[str]:
    name = f"wfr_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _catalog(url: str) -> dict[str, list[Any]]:
    with psycopg.connect(url) as conn:
        return {key: conn.execute(sql).fetchall() for key, sql in CATALOG_QUERIES.items()}  # type: ignore[arg-type]


def test_migrations_produce_exactly_the_declared_schema(db_url: str, empty_db: str) -> None:
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(schema_sql().encode())  # type: ignore[arg-type]
    migrated, declared = _catalog(db_url), _catalog(empty_db)
    for key in CATALOG_QUERIES:
        assert migrated[key] == declared[key], f"{key} differ between migrations and schema.sql"
    assert len(declared["columns"]) > 50


def test_applying_migrations_again_is_a_no_op(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert pending_migrations(conn) == []  # type: ignore[arg-type]
        assert apply_migrations(conn) == []  # type: ignore[arg-type]


def test_migrations_record_their_versions(empty_db: str) -> None:
    with psycopg.connect(empty_db, autocommit=True) as conn:
        applied = apply_migrations(conn)  # type: ignore[arg-type]
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    assert [m.version for m in applied] == versions
    assert versions[0] == 1


def test_a_concurrent_index_build_that_died_is_built_again(db_url: str) -> None:
    # A CREATE INDEX CONCURRENTLY that fails leaves an INVALID index of that name
    # behind; running the migration again must not keep it.
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("DROP INDEX workflow_runs_run_id_idx")
        conn.execute(
            "INSERT INTO workflow_runs VALUES (gen_random_uuid(), gen_random_uuid(), 'w',"
            " 'waiting', 1, 'f', 't', now(), now(), 1), (gen_random_uuid(),"
            " gen_random_uuid(), 'w', 'waiting', 1, 'f', 't', now(), now(), 1)"
        )
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "CREATE UNIQUE INDEX CONCURRENTLY workflow_runs_run_id_idx"
                " ON workflow_runs (workflow_name)"
            )
        version = next(m.version for m in all_migrations() if m.name == "console_run_lookups")
        conn.execute("DELETE FROM schema_migrations WHERE version = %s", (version,))
        applied = apply_migrations(conn)  # type: ignore[arg-type]
        assert [m.name for m in applied] == ["console_run_lookups"]
        row = conn.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'workflow_runs_run_id_idx'"
        ).fetchone()
    assert row is not None and row[0] is True
    assert row[1].endswith("USING btree (run_id)")


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, sql in files.items():
        (tmp_path / name).write_text(sql)
    return tmp_path


def test_a_reserved_number_counts_for_the_numbering_but_is_never_applied(
    tmp_path: Path,
) -> None:
    folder = _folder(
        tmp_path,
        {
            "0001_first.sql": "CREATE TABLE a (x int);",
            "0002_reserved_other_branch.sql": "-- migrate: reserved\n-- number 2: another branch",
            "0003_third.sql": "CREATE TABLE b (x int);",
        },
    )
    assert [(m.version, m.name) for m in all_migrations(folder)] == [(1, "first"), (3, "third")]


@pytest.mark.parametrize(
    "names",
    [
        ["0001_first.sql", "0003_third.sql"],  # a gap
        ["0001_first.sql", "0002_reserved.sql", "0002_real.sql"],  # the branches met
    ],
)
def test_a_gap_or_a_number_taken_twice_is_refused(tmp_path: Path, names: list[str]) -> None:
    sql = {"0002_reserved.sql": "-- migrate: reserved\n"}
    folder = _folder(tmp_path, {name: sql.get(name, "SELECT 1;") for name in names})
    with pytest.raises(StoreError, match="without gaps"):
        all_migrations(folder)
