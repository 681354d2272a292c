"""MkDocs hook: the CLI reference is rendered from `wfr`'s own argparse parser at build
time, so the page can never drift from the command line.

A page that holds the line `<!-- wfr-cli-reference -->` gets, in its place, one section
per command and subcommand (`wfr`, `wfr runs list`, ...): its `--help` text exactly as
the parser prints it, at a fixed width so the build does not depend on the terminal.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- wfr-cli-reference -->"
WIDTH = "88"


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("wfr",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command of the parser, depth first, in the order the parser lists them
    (an alias, such as `wfr show` for `wfr runs show`, is listed once per name)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def render() -> str:
    """The reference: a heading and the help text of every command."""
    from workflow_runner.cli.app import build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        sections = []
        for path, parser in commands(build_parser()):
            depth = "#" * min(len(path) + 1, 4)
            sections.append(f"{depth} `{' '.join(path)}`\n\n```text\n{parser.format_help()}```\n")
        return "\n".join(sections)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
