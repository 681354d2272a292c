"""HTML built so that every value is escaped unless it is already markup.

`el("td", run.workflow_name)` escapes the name; `Markup` marks text that is HTML
already (the output of `el`, or a literal of this package). Nothing else may reach a
page unescaped, so a workflow name, a reason or an event payload that contains
`<script>` is shown as text.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from urllib.parse import urlencode


class Markup(str):
    """Text that is HTML already and is inserted as is."""

    __slots__ = ()

    def __add__(self, other: str) -> Markup:
        """Markup + text stays markup, the text escaped (str's + would drop the mark)."""
        return Markup(str.__add__(self, esc(other)))


def esc(value: object) -> Markup:
    """`value` as HTML: markup as is, anything else escaped (None: empty)."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return Markup("")
    return Markup(html.escape(str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    """Several values as one piece of HTML, each escaped unless markup."""
    return Markup(esc(sep).join(esc(p) for p in parts))


def _attribute(name: str) -> str:
    return name.rstrip("_").replace("_", "-")


def el(tag: str, /, *children: object, **attrs: object) -> Markup:
    """An element: `el("a", "text", href="/x", class_="btn")`. Attributes that are None
    or False are left out; True gives a bare attribute."""
    parts = [tag]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        if value is True:
            parts.append(_attribute(key))
        else:
            parts.append(f'{_attribute(key)}="{esc(value)}"')
    opening = "<" + " ".join(parts) + ">"
    if tag in ("input", "br", "meta", "link", "hr"):
        return Markup(opening)
    return Markup(opening + join(children) + f"</{tag}>")


def url(path: str, params: Mapping[str, object] | None = None) -> str:
    """A link to `path` with the given query parameters (empty and None ones left out)."""
    query = {k: str(v) for k, v in (params or {}).items() if v not in (None, "", False)}
    return path + ("?" + urlencode(query) if query else "")
