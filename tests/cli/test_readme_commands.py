"""Every `wfr …` command the README shows exists and parses: the lines of its code
blocks and the commands quoted in its text (synopses like `[--tenant T]` included)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from workflow_runner.cli.app import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
# Documentation written for the site before it is folded in (docs/_drafts/).
DRAFTS = sorted((README.parent / "docs" / "_drafts").glob("*.md"))
# Values for placeholders, by the option they follow (anything else gets "x").
VALUES = {
    "--status": "failed",
    "--limit": "5",
    "--max": "5",
    "--step": "1",
    "--version": "1",
    "--port": "8080",
    "--format": "mermaid",
    "--batch": "500",
    "--max-batches": "2",
    "--last": "1",
}
_PLACEHOLDER = re.compile(r"^(<[^>]+>|[A-Z][A-Z0-9_]*)$")
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")


def _code_lines(text: str) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if inside:
            words = line.strip().removeprefix("$ ").split()
            while words and _ENV.match(words[0]):
                words.pop(0)
            if words[:1] == ["wfr"]:
                lines.append(" ".join(words).split(" #", 1)[0].strip())
    return lines


def _quoted(text: str) -> list[str]:
    without_blocks = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return [span for span in re.findall(r"`([^`\n]+)`", without_blocks) if span.startswith("wfr ")]


def _argv(command: str) -> list[str]:
    """The words of a command, with synopsis notation resolved: optional parts in, the
    first of alternatives, placeholders filled in."""
    text = command.replace("\\|", "|").replace("[", " ").replace("]", " ")
    words = shlex.split(text)[1:]
    if "|" in words:  # a pipeline: the command is what comes before it
        words = words[: words.index("|")]
    argv: list[str] = []
    for word in words:
        word = word.split("|", 1)[0]
        if _PLACEHOLDER.match(word):
            previous = argv[-1] if argv else ""
            word = VALUES.get(previous, "x")
        argv.append(word)
    return argv


def _parses(argv: list[str]) -> bool:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exit_:
            return exit_.code == 0
    return True


COMMANDS = sorted(
    {
        command
        for page in (README, *DRAFTS)
        for command in (*_code_lines(page.read_text()), *_quoted(page.read_text()))
    }
)


def test_the_readme_shows_commands() -> None:
    assert len(COMMANDS) > 30
    assert "wfr console --allow-actions" in COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_parses(command: str) -> None:
    if command.endswith("…"):
        # A reference to a command group (`wfr local …`): the group exists.
        argv = _argv(command.removesuffix("…").strip())
        assert _parses([*argv, "--help"]), command
        return
    argv = _argv(command)
    if _parses(argv):
        return
    # A command named in prose without its arguments (`wfr resume`): the command exists.
    options = [w for w in argv if w.startswith("-") and w != "--json"]
    assert not options and _parses([*argv, "--help"]), command
