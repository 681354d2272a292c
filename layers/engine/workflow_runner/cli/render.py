"""Terminal output for `wfr`: aligned tables, colour only on a terminal, JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

from ..durations import format_instant

_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}

STATUS_COLOURS = {
    "completed": "green",
    "waiting": "yellow",
    "running": "cyan",
    "failed": "red",
    "cancelled": "magenta",
    "suspended": "yellow",
    "already-resumed": "dim",
    "not-due": "dim",
    "ok": "green",
    "warning": "yellow",
    "problem": "red",
}


def wants_colour(stream: TextIO) -> bool:
    """Colour only for a terminal, and never when NO_COLOR is set or TERM is dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def to_json_value(value: Any) -> Any:
    """JSON-ready copy: instants as ISO-8601 UTC strings."""
    if isinstance(value, datetime):
        return format_instant(value)
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    return value


class Output:
    """Where a command writes: stdout for results, stderr for errors and progress."""

    def __init__(self, out: TextIO, err: TextIO, as_json: bool) -> None:
        self.out = out
        self.err = err
        self.as_json = as_json
        self.colour = wants_colour(out) and not as_json

    def paint(self, text: str, colour: str | None) -> str:
        if not self.colour or not colour:
            return text
        codes = ";".join(_CODES[c] for c in colour.split("+") if c in _CODES)
        return f"\033[{codes}m{text}\033[0m" if codes else text

    def status(self, text: str) -> str:
        return self.paint(text, STATUS_COLOURS.get(text))

    def line(self, text: str = "") -> None:
        print(text, file=self.out)

    def error(self, text: str) -> None:
        print(f"wfr: error: {text}", file=self.err)

    def warn(self, text: str) -> None:
        print(f"wfr: warning: {text}", file=self.err)

    def heading(self, text: str) -> None:
        self.line(self.paint(text, "bold"))

    def json(self, value: Any) -> None:
        print(json.dumps(to_json_value(value), indent=2, ensure_ascii=False), file=self.out)

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[Any]],
        colours: Sequence[str | None] | None = None,
        empty: str = "(none)",
    ) -> None:
        """Print rows aligned under headers; `colours[i]` names a column's colour rule
        ("status" colours each cell by its value)."""
        if not rows:
            self.line(self.paint(empty, "dim"))
            return
        cells = [[str(c) if c is not None else "-" for c in row] for row in rows]
        widths = [
            max(len(headers[i]), *(len(row[i]) for row in cells)) for i in range(len(headers))
        ]
        self.line(
            self.paint(
                "  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip(), "bold"
            )
        )
        for row in cells:
            parts = []
            for i, cell in enumerate(row):
                padded = cell.ljust(widths[i]) if i < len(row) - 1 else cell
                rule = colours[i] if colours and i < len(colours) else None
                if rule == "status":
                    padded = padded.replace(cell, self.status(cell), 1)
                elif rule:
                    padded = padded.replace(cell, self.paint(cell, rule), 1)
                parts.append(padded)
            self.line("  ".join(parts).rstrip())

    def progress(self, text: str, final: bool = False) -> None:
        """A one-line progress report on stderr (rewritten in place on a terminal)."""
        if wants_colour(self.err):
            self.err.write("\r\033[K" + text + ("\n" if final else ""))
            self.err.flush()
        elif final:
            print(text, file=self.err)
