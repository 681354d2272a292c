"""The migration policy that lets old and new code run side by side during a deploy.

SchemaMigration runs before any function moves to the new code, and with a canary or
linear DeploymentType the old version keeps serving part of the traffic afterwards (and
all of it again after a rollback). So a release's migrations may only expand the schema:

1. The code deployed before a migration keeps working after it. Checked against git
   history: for every commit that brought the migration to code that lacked it (the
   commit that added it, and each merge that brought it to the other line of history),
   every named query of the engine as it was in that parent must still PREPARE (parse,
   resolve every table, column and type) on a database with the commit's migrations.
   Migrations are known by name, not number: one renumbered when branches met is the
   same migration.
2. No constraint old writers could violate: no SET NOT NULL, no NOT NULL column without
   a default, no new CHECK / UNIQUE / foreign key on an existing table, no type change,
   rename or drop -- unless the migration is a declared contraction (`-- contract:` in
   its first lines), which must then pass rule 1 too: it may only remove what the
   previous release no longer uses. Expand in one release, contract in a later one.

Migrations up to POLICY_BASELINE predate the first deploy and were edited in place; the
history check starts after them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import psycopg
import pytest
from workflow_runner.embedded import database_url
from workflow_runner.store import migrate
from workflow_runner.store.migrate import Migration

ROOT = Path(__file__).resolve().parents[2]
ENGINE = "layers/engine"
REPOSITORY = ROOT  # whose history the checks read (a test points it elsewhere)
POLICY_BASELINE = 1

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"%\((\w+)\)s")

# Statements an expand migration must not contain (comments stripped, case-insensitive).
_CONTRACTING = [
    (re.compile(r"\bDROP\s+(TABLE|COLUMN|VIEW|TYPE|FUNCTION|SCHEMA)\b"), "drops"),
    (re.compile(r"\bRENAME\b"), "renames"),
    (re.compile(r"\bALTER\s+COLUMN\s+\w+\s+(SET\s+DATA\s+)?TYPE\b"), "changes a column type"),
    (re.compile(r"\bSET\s+NOT\s+NULL\b"), "adds NOT NULL to an existing column"),
    (
        re.compile(
            r"\bADD\s+(COLUMN\s+)?(?:(?!\bDEFAULT\b)[^,;])*\bNOT\s+NULL\b(?:(?!\bDEFAULT\b)[^,;])*(?=[,;]|$)"
        ),
        "adds a NOT NULL column without a default",
    ),
    (
        re.compile(r"\bADD\s+(CONSTRAINT\s+\w+\s+)?(CHECK|UNIQUE|FOREIGN\s+KEY|PRIMARY\s+KEY)\b"),
        "adds a constraint to an existing table",
    ),
]


def named_queries(sql_files: Mapping[str, str]) -> dict[str, str]:
    """name -> SQL of every `-- name:` block in the given query files."""
    found: dict[str, str] = {}
    for text in sql_files.values():
        parts = _NAME.split(text)
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            found[name] = body.strip()
    return found


def _positional(sql: str) -> str:
    """psycopg's %(name)s placeholders as PREPARE's $1, $2 ... (one number per name), and
    its %% escape as the % the server sees (a modulo, a LIKE pattern)."""
    numbers: dict[str, int] = {}
    for param in _PARAM.findall(sql):
        numbers.setdefault(param, len(numbers) + 1)
    return _PARAM.sub(lambda m: f"${numbers[m.group(1)]}", sql).replace("%%", "%")


def prepare_failures(conn: psycopg.Connection[object], queries: Mapping[str, str]) -> list[str]:
    """Queries that do not PREPARE on this database, with PostgreSQL's reason."""
    failures = []
    for name, sql in queries.items():
        text = _positional(sql).rstrip().rstrip(";")
        try:
            with conn.transaction():
                conn.execute(f"PREPARE policy_check AS {text}".encode())
                conn.execute("DEALLOCATE policy_check")
        except psycopg.errors.IndeterminateDatatype:
            # `%(x)s IS NULL OR ...`: PREPARE alone cannot type the parameter, which the
            # driver types when it runs; a property of the query text, not of the schema.
            continue
        except psycopg.errors.DatatypeMismatch as error:
            # `SET col = CASE ... THEN %(now)s ...`: PREPARE resolves an untyped parameter
            # in a CASE to text, where the driver sends it typed (a datetime as
            # timestamptz). Also a property of the text; a column's type change is refused
            # by the static check.
            if _PARAM.search(sql) and "but expression is of type text" in str(error):
                continue
            failures.append(f"{name}: {str(error).splitlines()[0]}")
        except psycopg.Error as error:
            failures.append(f"{name}: {str(error).splitlines()[0]}")
    return failures


def contracting_statements(sql: str) -> list[str]:
    """What in a migration's SQL could break the code deployed before it."""
    code = re.sub(r"--[^\n]*", "", sql).upper()
    code = re.sub(r"\s+", " ", code)
    problems = []
    for pattern, what in _CONTRACTING:
        for statement in code.split(";"):
            if "CREATE TABLE" in statement:
                continue  # constraints of a brand-new table bind nobody yet
            if pattern.search(statement + ";"):
                problems.append(f"{what}: {statement.strip()[:120]}")
    return problems


def is_contraction(migration: Migration) -> bool:
    return any(line.startswith("-- contract:") for line in migration.sql.splitlines()[:5])


# --- the database -----------------------------------------------------------------------


@contextmanager
def fresh_database(server_url: str) -> Iterator[psycopg.Connection[object]]:
    name = f"wfr_policy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(database_url(server_url, name), autocommit=True) as conn:
            yield conn  # type: ignore[misc]
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_db(pg_server_url: str) -> Iterator[psycopg.Connection[object]]:
    with fresh_database(pg_server_url) as conn:
        yield conn


def migrate_up_to(conn: psycopg.Connection[object], migrations: list[Migration]) -> None:
    """Apply these migrations as the runner does: each in a transaction, or statement by
    statement when marked `-- migrate: no-transaction` (CREATE INDEX CONCURRENTLY)."""
    for migration in migrations:
        if migration.transactional:
            with conn.transaction():
                conn.execute(migration.sql.encode())
        else:
            for statement in migration.statements():
                conn.execute(statement.encode())


# --- git history -------------------------------------------------------------------------


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd or REPOSITORY, capture_output=True, text=True, check=True
    ).stdout


def history_available() -> bool:
    try:
        return git("rev-parse", "--is-shallow-repository").strip() == "false"
    except (OSError, subprocess.CalledProcessError):
        return False


_MIGRATION_FILE = re.compile(r"/migrations/\d{4}_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Deploy:
    """One step of history that brought migrations to running code: the code of commit
    `before` keeps running on a database migrated to `after` (the names of every
    migration of the commit deployed over it), `brought` being the ones it lacked."""

    before: str
    after: frozenset[str]
    brought: frozenset[str]


def migrations_at(commit: str) -> frozenset[str]:
    """Names (without their number) of the engine's migrations at a commit. Names, not
    numbers: a migration renumbered when two branches met is still the same migration."""
    paths = git("ls-tree", "-r", "--name-only", commit, "--", ENGINE).split()
    return frozenset(m.group(1) for p in paths if (m := _MIGRATION_FILE.search(p)))


@cache
def deploys() -> tuple[Deploy, ...]:
    """Every commit reachable from HEAD that has migrations one of its parents lacks, as
    a deploy over that parent: the next commit of one line of history, and both sides of
    a merge (a branch meeting main's migrations, and main meeting the branch's). Plus the
    working tree over HEAD while a migration is not committed yet."""
    known: dict[str, frozenset[str]] = {}

    def at(commit: str) -> frozenset[str]:
        if commit not in known:
            known[commit] = migrations_at(commit)
        return known[commit]

    found: dict[tuple[str, frozenset[str]], Deploy] = {}

    def add(before: str, after: frozenset[str]) -> None:
        if after - at(before):
            found.setdefault((before, after), Deploy(before, after, after - at(before)))

    add("HEAD", frozenset(m.name for m in migrate.all_migrations()))
    for line in git("rev-list", "--parents", "HEAD").splitlines():
        commit, *parents = line.split()
        for parent in parents:
            add(parent, at(commit))
    return tuple(found.values())


def query_files_at(commit: str) -> dict[str, str]:
    """The engine's named-query files at a commit (wherever the engine kept them)."""
    paths = git("ls-tree", "-r", "--name-only", commit, "--", ENGINE).split()
    wanted = [
        p
        for p in paths
        if p.endswith(".sql") and "/migrations/" not in p and not p.endswith("/schema.sql")
    ]
    return {p: git("show", f"{commit}:{p}") for p in wanted}


# --- the policy, on the shipped migrations --------------------------------------------


def later_migrations() -> list[Migration]:
    return [m for m in migrate.all_migrations() if m.version > POLICY_BASELINE]


@pytest.mark.parametrize("migration", later_migrations(), ids=lambda m: f"{m.version:04d}_{m.name}")
def test_the_code_before_each_migration_still_runs_after_it(
    pg_server_url: str, migration: Migration
) -> None:
    if not history_available():
        pytest.skip("needs the git history (not a shallow clone) to know the older code")
    steps = [d for d in deploys() if migration.name in d.brought]
    assert steps, f"no commit of the history brings {migration.name}"
    for step in steps:
        queries = named_queries(query_files_at(step.before))
        assert queries, f"no named queries found at {step.before}"
        # A query that did not PREPARE on its own commit's schema either is a property of
        # its text (a parameter PREPARE types differently than the driver does, as a
        # `CASE ... THEN %(now)s` into a timestamptz column once did), not a break this
        # migration caused: only failures the migration adds count.
        before = failing_queries(pg_server_url, migrations_at(step.before), queries)
        after = failing_queries(pg_server_url, step.after, queries)
        broken = [failure for failure in after if failure not in before]
        assert broken == [], (
            f"{migration.name} breaks queries of the code deployed before it "
            f"({step.before}); expand now and contract in a later release"
        )


def failing_queries(
    server_url: str, migration_names: frozenset[str], queries: Mapping[str, str]
) -> list[str]:
    """The queries that do not PREPARE on a database with these (shipped) migrations."""
    with fresh_database(server_url) as conn:
        migrate_up_to(conn, [m for m in migrate.all_migrations() if m.name in migration_names])
        return prepare_failures(conn, queries)


@pytest.mark.parametrize("migration", later_migrations(), ids=lambda m: f"{m.version:04d}_{m.name}")
def test_each_migration_only_expands_unless_declared_a_contraction(migration: Migration) -> None:
    if is_contraction(migration):
        return  # rule 1 (the history check) still applies
    assert contracting_statements(migration.sql) == []


def test_the_current_code_runs_on_the_current_schema(fresh_db: psycopg.Connection[object]) -> None:
    from workflow_runner.store.queries import queries

    migrate_up_to(fresh_db, migrate.all_migrations())
    assert prepare_failures(fresh_db, queries()) == []


# --- the checks themselves catch what they are for --------------------------------------


def test_an_untyped_parameter_in_a_case_is_not_a_schema_break(
    fresh_db: psycopg.Connection[object],
) -> None:
    migrate_up_to(fresh_db, migrate.all_migrations())
    untyped = (
        "UPDATE inbox SET woken_at = CASE WHEN %(late)s THEN %(now)s ELSE NULL END"
        " WHERE tenant_id = %(tenant_id)s"
    )
    gone = "UPDATE inbox SET woken_at = %(now)s WHERE no_such_column = %(tenant_id)s"
    assert prepare_failures(fresh_db, {"untyped": untyped, "gone": gone}) == [
        'gone: column "no_such_column" does not exist'
    ]


def test_the_history_check_catches_a_rename_and_passes_an_addition(
    fresh_db: psycopg.Connection[object],
) -> None:
    from workflow_runner.store.queries import queries

    migrate_up_to(fresh_db, migrate.all_migrations())
    with fresh_db.transaction():
        fresh_db.execute("ALTER TABLE inbox ADD COLUMN note text")
    assert prepare_failures(fresh_db, queries()) == []
    with fresh_db.transaction():
        fresh_db.execute("ALTER TABLE inbox RENAME COLUMN detail TO body")
    broken = prepare_failures(fresh_db, queries())
    assert broken and all("detail" in reason for reason in broken)


@pytest.mark.parametrize(
    ("sql", "caught"),
    [
        ("ALTER TABLE inbox DROP COLUMN detail;", "drops"),
        ("ALTER TABLE inbox RENAME COLUMN detail TO body;", "renames"),
        ("ALTER TABLE inbox ALTER COLUMN detail TYPE text;", "changes a column type"),
        ("ALTER TABLE inbox ALTER COLUMN source SET NOT NULL;", "adds NOT NULL"),
        ("ALTER TABLE inbox ADD COLUMN note text NOT NULL;", "without a default"),
        ("ALTER TABLE inbox ADD CONSTRAINT c CHECK (source <> '');", "adds a constraint"),
        ("ALTER TABLE inbox ADD COLUMN note text NOT NULL DEFAULT '';", None),
        ("ALTER TABLE inbox ADD COLUMN note text; -- DROP TABLE x;", None),
        ("CREATE TABLE t (id int PRIMARY KEY, n text NOT NULL UNIQUE);", None),
        ("CREATE INDEX inbox_note ON inbox (source);", None),
    ],
)
def test_the_static_check_tells_expansions_from_contractions(sql: str, caught: str | None) -> None:
    problems = contracting_statements(sql)
    if caught is None:
        assert problems == []
    else:
        assert len(problems) == 1 and caught in problems[0]


def test_history_knows_a_migration_by_its_name_across_a_renumbering_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main adds 0002_tasks while a branch adds 0002_console; the merge renumbers the
    branch's to 0003. Both sides of the merge are deploys to check: the branch's code
    meets `tasks`, main's code meets `console`; the renumbering itself brings nothing."""
    folder = tmp_path / ENGINE / "wf/store/migrations"
    folder.mkdir(parents=True)

    def run(*args: str) -> str:
        return git(*args, cwd=tmp_path)

    def commit(message: str) -> str:
        run("add", "-A")
        run("commit", "-q", "-m", message)
        return run("rev-parse", "HEAD").strip()

    run("init", "-q", "-b", "main")
    run("config", "user.email", "t@example.com")
    run("config", "user.name", "t")
    (folder / "0001_initial.sql").write_text("CREATE TABLE t (id int);\n")
    base = commit("initial")
    run("checkout", "-q", "-b", "console")
    (folder / "0002_console.sql").write_text("CREATE INDEX t_id ON t (id);\n")
    console = commit("console")
    run("checkout", "-q", "main")
    (folder / "0002_tasks.sql").write_text("CREATE TABLE tasks (id int);\n")
    tasks = commit("tasks")
    run("merge", "-q", "--no-commit", "console")
    (folder / "0002_console.sql").rename(folder / "0003_console.sql")
    commit("merge console, renumbered after tasks")

    monkeypatch.setattr(sys.modules[__name__], "REPOSITORY", tmp_path)
    shipped = [Migration(1, "initial", ""), Migration(2, "tasks", ""), Migration(3, "console", "")]
    monkeypatch.setattr(migrate, "all_migrations", lambda: shipped)
    everything = frozenset({"initial", "tasks", "console"})
    found = set(deploys.__wrapped__())  # type: ignore[attr-defined]
    assert found == {
        Deploy(base, frozenset({"initial", "console"}), frozenset({"console"})),
        Deploy(base, frozenset({"initial", "tasks"}), frozenset({"tasks"})),
        Deploy(console, everything, frozenset({"tasks"})),
        Deploy(tasks, everything, frozenset({"console"})),
    }
