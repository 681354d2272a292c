"""The console's HTML helpers: values are escaped unless they are markup, and doctor
findings link what they name to the right page."""

from __future__ import annotations

from workflow_runner.console.html import Markup, el, esc, url
from workflow_runner.console.views import _doctor_item

T = "11111111-1111-4111-8111-111111111111"
R = "22222222-2222-4222-8222-222222222222"
Q = "33333333-3333-4333-8333-333333333333"


def test_text_is_escaped_and_markup_is_kept() -> None:
    assert el("td", "<b>x</b>") == "<td>&lt;b&gt;x&lt;/b&gt;</td>"
    assert el("td", Markup("<b>x</b>")) == "<td><b>x</b></td>"
    assert el("a", "x", href='"/><script>', class_="btn") == (
        '<a href="&quot;/&gt;&lt;script&gt;" class="btn">x</a>'
    )
    joined = Markup("<p>") + "<i>"
    assert isinstance(joined, Markup) and joined == "<p>&lt;i&gt;"
    assert esc(None) == "" and el("input", disabled=True, value=None) == "<input disabled>"
    assert url("/", {"status": "failed", "after": None, "key": "a b&c"}) == (
        "/?status=failed&key=a+b%26c"
    )


def test_doctor_items_link_runs_and_deliveries() -> None:
    run = _doctor_item(f"{T} {R} order-approval (waiting)")
    assert f'href="/runs/{R}?tenant={T}"' in run
    stuck = _doctor_item(f"{T} {Q} mail.send run {R}")
    assert f'href="/runs/{R}?tenant={T}"' in stuck and f"/runs/{Q}" not in stuck
    failed = _doctor_item(f"{T} {Q} webhook.send: webhook destination refused (refused)")
    assert f'href="/deliveries?tenant={T}"' in failed and "/runs/" not in failed
    task = _doctor_item(f"{T} run {R} task charge: workflow step failed (ValueError)")
    assert f'href="/runs/{R}?tenant={T}"' in task and "task charge" in task
    assert "<script>" not in _doctor_item("<script>alert(1)</script>")
