"""Debian's headless chromium, as the browser tests drive it through Playwright: the
binary (installed from the distribution by .ci/run, never downloaded by Playwright), the
flags, and the mark that skips a module when either is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)",
)
playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]'")
