"""MkDocs hook: files of the repository that generated pages link from outside docs/,
and the console's screenshots as the last browser test took them.

The browser test (tests/browser) writes the console's screenshots to
build/console-screenshots/ whenever it passes; the site shows those in place of the
committed copies in docs/console/ (which `make screenshots` refreshes), so a site built
after a test run never shows a stale picture and a test run never changes the tree.

docs/BENCHMARKS.md is written by `make bench` and shows the plot it writes next to its
figures, `bench/results.png`, as `../bench/results.png` (a link that works on GitHub).
The site copies each such file to the same path under the site and points the link at
that copy, so the generated page needs no edit and the build stays strict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ("bench/results.png",)


FRESH_SCREENSHOTS = ROOT / "build" / "console-screenshots"


def on_files(files: Files, config: Any, **_: Any) -> Files:
    for path in OUTSIDE:
        files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    for file in files:
        fresh = FRESH_SCREENSHOTS / Path(file.src_uri).name
        shot = file.src_uri.startswith("console/") and file.src_uri.endswith(".png")
        if shot and fresh.is_file():
            file.abs_src_path = str(fresh)
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    depth = page.file.src_uri.count("/")
    for path in OUTSIDE:
        markdown = markdown.replace(f"]({'../' * (depth + 1)}{path})", f"]({'../' * depth}{path})")
    return markdown
