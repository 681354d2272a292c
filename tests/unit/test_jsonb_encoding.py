"""The engine's jsonb encoder (store/database.py, _to_json): where a "None" key sends a
value through json.dumps, what json.dumps cannot encode is encoded as pydantic-core
encodes it on the usual path."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from workflow_runner.store.database import _to_json

AT = datetime(2026, 1, 5, 9, 0, 0, 5, tzinfo=UTC)


def test_an_instant_beside_a_none_key_is_encoded_as_on_the_usual_path() -> None:
    usual = json.loads(_to_json({"at": AT}))
    fallback = json.loads(_to_json({"None": 1, "at": AT}))
    assert fallback == {"None": 1, "at": usual["at"]}
    assert datetime.fromisoformat(fallback["at"]) == AT


def test_a_none_key_is_still_written_as_json_dumps_writes_it() -> None:
    assert json.loads(_to_json({None: 1, "n": None})) == {"null": 1, "n": None}
