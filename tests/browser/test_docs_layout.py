"""The built documentation site as a reader sees it, in Debian's headless chromium: no
table on any page is wider than the content column (the benchmark report's eight-column
tables once needed a horizontal scroll to show their last column).

It reads a built site, so it runs only when WFR_DOCS_SITE names one: `make docs-check`,
which CI runs after `make docs`. Under `make test` (which does not build the site) it
is skipped rather than reading a stale build."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.headless import ARGS, CHROMIUM, needs_chromium, playwright_api

SITE = os.environ.get("WFR_DOCS_SITE", "")
VIEWPORT = {"width": 1300, "height": 1000}


# Each table wider than the box that holds it: its width, the box's, and its header row.
OVERFLOWING = """() => [...document.querySelectorAll('article table')].flatMap(t => {
    const box = t.closest('.md-typeset__scrollwrap') || t.parentElement;
    const head = [...t.querySelectorAll('th')].map(h => h.textContent.trim()).join(' | ');
    return t.scrollWidth > box.clientWidth + 1 ? [[t.scrollWidth, box.clientWidth, head]] : [];
})"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # one line a page otherwise
        pass


def _pages(site: Path) -> list[str]:
    return sorted(
        str(page.parent.relative_to(site)).removeprefix(".")
        for page in site.glob("**/index.html")
        if page.parent.relative_to(site).parts[:1] not in (("assets",), ("search",))
    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, list[str]]]:
    if not SITE:
        pytest.skip("no built site: `make docs-check` names one")
    site = Path(SITE).resolve()
    pages = _pages(site)
    assert pages, f"no pages under {site}: run `make docs` first"
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()


def test_pages_are_found_at_every_depth(tmp_path: Path) -> None:
    for page in ("index.html", "BENCHMARKS/index.html", "reference/limits/index.html"):
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text("<html></html>")
    (tmp_path / "assets" / "x").mkdir(parents=True)
    (tmp_path / "assets" / "x" / "index.html").write_text("")
    assert _pages(tmp_path) == ["", "BENCHMARKS", "reference/limits"]


@needs_chromium
def test_no_table_is_wider_than_the_content_column(served: tuple[str, list[str]]) -> None:
    base, pages = served
    too_wide: dict[str, list[list[object]]] = {}
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            tab = browser.new_page(viewport=VIEWPORT)
            for page in pages:
                tab.goto(f"{base}/{page}/" if page else f"{base}/")
                found = tab.evaluate(OVERFLOWING)
                if found:
                    too_wide[page or "/"] = found
        finally:
            browser.close()
    assert not too_wide, f"tables wider than the content column at 1300 px: {too_wide}"
