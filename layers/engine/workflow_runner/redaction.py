"""Redaction of text that may carry personal data before it reaches a log line."""

from __future__ import annotations

import re

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
_IPV4 = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}\b")
_IPV6 = re.compile(r"\b[0-9a-fA-F]{0,4}(:[0-9a-fA-F]{0,4}){2,7}\b")


def redact(text: str) -> str:
    """Raw error text with mail and IP addresses masked, for the log."""
    return _IPV6.sub("<ip>", _IPV4.sub("<ip>", _EMAIL.sub("<email>", text)))
