"""The named queries as the driver receives them: no comment lines, and short enough for
psycopg's parse cache, so a hot statement is not parsed again on every execute."""

from __future__ import annotations

import re

from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH
from workflow_runner.store.queries import _without_comment_lines, queries
from workflow_runner.store.streams import MATCH_TYPES

# Run once an hour by the retention job, a batch at a time: parsing its text each time
# costs nothing that matters.
_LONG_ON_PURPOSE = {"purge_runs"}


def test_hot_queries_fit_the_drivers_parse_cache() -> None:
    too_long = {
        name: len(text.encode())
        for name, text in queries().items()
        if len(text.encode()) > MAX_CACHED_STATEMENT_LENGTH and name not in _LONG_ON_PURPOSE
    }
    assert too_long == {}


def test_record_pass_goes_out_without_its_comments() -> None:
    text = queries()["record_pass"]
    assert "--" not in text
    assert text.startswith("WITH appended AS (")
    assert "RETURNING j.tenant_id::text AS tenant_id" in text


def test_no_query_has_a_literal_spanning_lines() -> None:
    # Dropping lines that start with `--` is only safe while no string literal spans
    # lines (inside one, such a line would be text).
    spanning = {
        name
        for name, text in queries().items()
        for line in text.splitlines()
        if line.count("'") % 2
    }
    assert spanning == set()


def test_comment_lines_are_dropped_and_code_kept() -> None:
    body = "\n  -- why\nSELECT 1  \n    -- more\n  FROM t -- kept: not a line of its own\n"
    assert _without_comment_lines(body) == "SELECT 1\n  FROM t -- kept: not a line of its own"


def test_the_tail_read_joins_the_inbox_row_of_exactly_the_match_types() -> None:
    """load_run_tail spells the match types as literals (a generic plan needs no
    parameter for them); they must be the ones the store reads the rows back by."""
    spelled = set(re.findall(r"'(workflow\.[a-z.-]+)'", queries()["load_run_tail"]))
    assert spelled == set(MATCH_TYPES)
