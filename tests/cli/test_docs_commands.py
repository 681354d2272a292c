"""Every `wfr …` command the README and the docs site show exists and parses: the lines
of their code blocks and the commands quoted in their text (synopses like `[--tenant T]`
included), page by page."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from workflow_runner.cli.app import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
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


def _commands(page: Path) -> set[str]:
    text = page.read_text()
    return set(_code_lines(text)) | set(_quoted(text))


# (page, command) pairs, so a failure names the page that shows the command.
COMMANDS = sorted(
    (str(page.relative_to(ROOT)), command) for page in PAGES for command in _commands(page)
)


def test_the_pages_show_commands() -> None:
    shown = {command for _, command in COMMANDS}
    assert len(shown) > 30
    assert "wfr console --allow-actions" in shown
    assert {"wfr init shop", "wfr export-app build/engine"} <= shown
    pages = {page for page, _ in COMMANDS}
    assert {"README.md", "docs/operating/cli.md", "docs/local.md"} <= pages


@pytest.mark.parametrize(("page", "command"), COMMANDS)
def test_a_shown_command_parses(page: str, command: str) -> None:
    if command.endswith("…"):
        # A reference to a command group (`wfr local …`): the group exists.
        argv = _argv(command.removesuffix("…").strip())
        assert _parses([*argv, "--help"]), (page, command)
        return
    argv = _argv(command)
    if _parses(argv):
        return
    # A command named in prose without its arguments (`wfr resume`): the command exists.
    options = [w for w in argv if w.startswith("-") and w != "--json"]
    assert not options and _parses([*argv, "--help"]), (page, command)
