"""The docs site's pages hold together without a build: every snippet a page pulls in is
a file (under docs/examples/, or of the repository), no Python sample is written inline
where no test would run it, every picture a page shows exists, and the console's page
shows each screenshot the browser test writes. `make docs` (mkdocs build --strict)
checks links, anchors and the nav on top of this."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIP = ("examples", "hooks")
PAGES = sorted(p for p in DOCS.rglob("*.md") if p.relative_to(DOCS).parts[0] not in SKIP)
SNIPPET = re.compile(r'^\s*--8<-- "(?P<target>[^"]+)"\s*$', re.MULTILINE)
IMAGE = re.compile(r"!\[[^\]]*\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)


def _snippet_bases() -> list[Path]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python/name:", ""))
    for extension in config["markdown_extensions"]:
        if isinstance(extension, dict) and "pymdownx.snippets" in extension:
            return [ROOT / base for base in extension["pymdownx.snippets"]["base_path"]]
    raise AssertionError("mkdocs.yml has no pymdownx.snippets")


def _resolve(target: str) -> Path | None:
    name = re.sub(r":[\w-]+(:\d+)?$", "", target)  # a section or a line range
    for base in _snippet_bases():
        if (base / name).is_file():
            return base / name
    return None


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_snippet_of_a_page_is_a_file(page: Path) -> None:
    for found in SNIPPET.finditer(page.read_text()):
        target = found["target"]
        path = _resolve(target)
        assert path is not None, f"{_name(page)}: {target}"
        section = re.search(r":([A-Za-z_][\w-]*)$", target)
        if section:
            assert f"[start:{section[1]}]" in path.read_text(), f"{_name(page)}: {target}"


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=_name)
def test_no_python_sample_is_written_inline(page: Path) -> None:
    """A Python sample is a file the tests run, pulled in by a snippet, never a fence
    holding code."""
    for fence in FENCE.finditer(page.read_text()):
        if fence["lang"] == "python":
            assert SNIPPET.fullmatch(fence["body"].rstrip("\n")), (
                f"{_name(page)}: an inline python block; put it under docs/examples/"
            )


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=_name)
def test_every_picture_a_page_shows_exists(page: Path) -> None:
    for found in IMAGE.finditer(page.read_text()):
        target = found["target"]
        assert (page.parent / target).resolve().is_file(), f"{_name(page)}: {target}"


def test_the_console_page_shows_every_screenshot_the_browser_test_writes() -> None:
    """The console's page shows every committed screenshot in docs/console/ (which the
    browser test refreshes into build/, and `make screenshots` commits), and nothing
    else; the browser test takes each of them."""
    shown = {
        (DOCS / "operating" / m["target"]).resolve()
        for m in IMAGE.finditer((DOCS / "operating" / "console.md").read_text())
    }
    written = {path.resolve() for path in (DOCS / "console").glob("*.png")}
    assert written and shown == written
    taken = (ROOT / "tests" / "browser" / "test_console_browser.py").read_text()
    assert all(f'"{path.name}"' in taken for path in written)


def test_every_page_the_readme_links_exists() -> None:
    """The README's links into docs/ work on GitHub: relative paths to files."""
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local and all((ROOT / link).is_file() for link in local), [
        link for link in local if not (ROOT / link).is_file()
    ]


def test_the_configuration_page_documents_every_setting() -> None:
    """Every environment variable the engine reads is on the configuration page
    (AWS_REGION is Lambda's own)."""
    from workflow_runner.settings import _ENV_FIELDS

    documented = (DOCS / "reference" / "configuration.md").read_text()
    missing = [name for name in _ENV_FIELDS if f"`{name}`" not in documented]
    assert missing == ["AWS_REGION"]


@pytest.mark.parametrize(
    ("module", "page"),
    [("workflow_runner", "reference/api.md"), ("workflow_runner.testing", "reference/testing.md")],
)
def test_the_api_reference_renders_every_public_name(module: str, page: str) -> None:
    """Each name the package exports is rendered by mkdocstrings on its reference page:
    a `::: dotted.name` directive, or a member listed under one."""
    import importlib

    text = (DOCS / page).read_text()
    rendered = set(re.findall(r"^::: [\w.]*?(\w+)$", text, flags=re.MULTILINE))
    rendered |= set(re.findall(r"^\s+(?:- |members: \[)(\w+)", text, flags=re.MULTILINE))
    for listed in re.findall(r"members: \[([^\]]+)\]", text):
        rendered |= {name.strip() for name in listed.split(",")}
    missing = [n for n in importlib.import_module(module).__all__ if n not in rendered]
    assert missing == []
