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
# Values for placeholders, by the option they follow (anything else gets "x").
VALUES = {
    "--status": "failed",
    "--limit": "5",
    "--max": "5",
    "--step": "1",
    "--version": "1",
    "--to-version": "2",
    "--port": "8080",
    "--format": "mermaid",
    "--batch": "500",
    "--max-batches": "2",
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


def test_the_readme_shows_commands() -> None:
    assert len(COMMANDS) > 30
    assert "wfr console --allow-actions" in COMMANDS


def command_parses(command: str) -> bool:
    """Whether a command a page shows exists and parses (see the module's docstring)."""
    if command.endswith("…"):
        # A reference to a command group (`wfr local …`): the group exists.
        return _parses([*_argv(command.removesuffix("…").strip()), "--help"])
    argv = _argv(command)
    if _parses(argv):
        return True
    # A command named in prose without its arguments (`wfr resume`): the command exists.
    options = [w for w in argv if w.startswith("-") and w != "--json"]
    return not options and _parses([*argv, "--help"])


def commands_of(text: str) -> list[str]:
    """The `wfr` commands of a page: its code blocks' lines and the ones quoted in it."""
    return sorted(set(_code_lines(text)) | set(_quoted(text)))


COMMANDS = commands_of(README.read_text())


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_parses(command: str) -> None:
    assert command_parses(command), command
