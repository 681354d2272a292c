"""Loads the named queries of queries.sql once."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from ..errors import StoreError

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


# Folders of the engine package whose queries*.sql are loaded too: flow control keeps its
# SQL beside its store module (flow/store.py), a room of its own.
_OTHER_FOLDERS = ("flow",)


@cache
def queries() -> dict[str, str]:
    """Map query name -> SQL text, from queries.sql and every queries_<area>.sql beside it
    (and in the folders of _OTHER_FOLDERS)."""
    found: dict[str, str] = {}
    package = resources.files(__package__)
    top = resources.files(__package__.rsplit(".", 1)[0])
    folders = [package, *(top.joinpath(name) for name in _OTHER_FOLDERS)]
    files = sorted(
        (
            entry
            for folder in folders
            for entry in folder.iterdir()
            if entry.name.startswith("queries") and entry.name.endswith(".sql")
        ),
        key=lambda entry: entry.name,
    )
    for entry in files:
        parts = _NAME.split(entry.read_text())
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in found:
                raise StoreError(f"{entry.name} defines query {name!r} again")
            found[name] = _without_comment_lines(body)
    return found


def _without_comment_lines(body: str) -> str:
    """The statement without its comment lines (no query has a string literal that spans
    lines, so a line that starts with `--` is a comment). What goes to the driver is
    then short enough for psycopg's parse cache (4,096 bytes at most): a longer text is
    split again on every execute, ~60 us for record_pass, a resume batch's hot
    statement."""
    lines = (line.rstrip() for line in body.strip().splitlines())
    return "\n".join(line for line in lines if not line.lstrip().startswith("--"))


# A query may read a bound its plan must know (a LIMIT the server plans for as a
# number, not as a parameter of unknown size): its text says `<n> /* bound */`, a
# default that keeps it runnable as it is, and it is run as "<name>@<n>", one prepared
# statement per bound used.
_BOUND = re.compile(r"\b\d+ /\* bound \*/")


@cache
def query(name: str) -> str:
    """The SQL of one named query ("<name>@<n>": with its bound written as n)."""
    base, _, bound = name.partition("@")
    text = queries()[base]
    if not bound:
        return text
    if not bound.isdigit() or not _BOUND.search(text):
        raise StoreError(f"query {base!r} takes no bound {bound!r}")
    return _BOUND.sub(bound, text)
