"""What of an exception's text may reach a log line.

Exceptions raised by user code (a compute, a resolver, a trigger filter) and by the
providers the dispatcher calls (SES, HTTPS) carry text that can hold personal data:
`ValueError("order of jane@example.com, card 4111 …")`. Stored events never carry it
(invariant 8); every log line that would carry it goes through one policy here:

- by default the line gets the exception's class and a short hash of its text,
  `ValueError (text hash 3f2a9c1b)`: equal failures share a hash, so they can be
  counted and correlated across lines without the text;
- the full text only when the operator opts in, with `LOG_EXCEPTION_TEXT=true`
  (`Settings.log_exception_text`; the functions and the local runtime apply it).

The hash is eight hex digits of SHA-256: enough to tell errors apart, too short to
confirm a guessed text with any confidence.
"""

from __future__ import annotations

import hashlib
import os
import re

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
_IPV4 = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}\b")
_IPV6 = re.compile(r"\b[0-9a-fA-F]{0,4}(:[0-9a-fA-F]{0,4}){2,7}\b")

ENV_VAR = "LOG_EXCEPTION_TEXT"
_TRUE = frozenset({"1", "true", "yes", "on"})

_full_text: bool | None = None  # None: follow the environment


def configure(full_text: bool | None) -> None:
    """Set the policy for this process: True logs full exception text, False only class
    and hash; None follows `LOG_EXCEPTION_TEXT` (the default)."""
    global _full_text
    _full_text = full_text


def configured() -> bool | None:
    """The policy `configure` set (None: it follows the environment)."""
    return _full_text


def full_text_enabled() -> bool:
    """Whether the operator opted in to full exception text in log lines."""
    if _full_text is not None:
        return _full_text
    return os.environ.get(ENV_VAR, "").strip().lower() in _TRUE


def _hidden(kind: str, text: str) -> str:
    if not text:
        return f"{kind} (no text)"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{kind} (text hash {digest})"


def exception_for_log(error: BaseException) -> str:
    """An exception as a log line may show it: `ValueError (text hash 3f2a9c1b)`, or
    `ValueError: <text>` when the operator opted in."""
    kind = type(error).__name__
    text = str(error)
    if full_text_enabled():
        return f"{kind}: {text}" if text else kind
    return _hidden(kind, text)


def detail_for_log(detail: str) -> str:
    """A `<Class>: <text>` description (a failed pass's `error_detail`) under the policy."""
    if full_text_enabled():
        return detail
    kind, sep, text = detail.partition(": ")
    if not sep or not kind.isidentifier():
        kind, text = "error", detail
    return _hidden(kind, text)


def redact(text: str) -> str:
    """Raw text with mail and IP addresses masked (for text that is not an exception's)."""
    return _IPV6.sub("<ip>", _IPV4.sub("<ip>", _EMAIL.sub("<email>", text)))


def redacted_text(kind: str, text: str) -> str:
    """What may be stored of a text someone outside sent (a callback failure's message):
    `kind` and a short hash of the text, `PaymentDeclined (text hash 3f2a9c1b)`, whatever
    the log policy; the text itself only reaches a log line (detail_for_log)."""
    return _hidden(kind, text)
