"""Callback tokens: what `ctx.callback` hands out and `wait_for_callback` waits on, and
what `ctx.callbacks[name]` hands out for a callback a create_callback step made.

A token is `wfrcb_` and 43 base64url characters (256 bits). It is derived, not drawn:
HMAC-SHA256 keyed by the run's secret (32 random bytes recorded on
`workflow.run-started`) over the pass's dispatch seed and the callback's ordinal in the
pass. A pass repeated with its seed (rolled back and run again, or a failed pass
redriven) hands out the same token, so a mail the first attempt requested (same request
id, never sent twice) carries a token that still works. A run started before this
release has no secret: its tokens are drawn at random (a redrive then mints a new one).
A created callback's token is derived the same way from its `mint` (the pass's seed and
the create's ordinal in it), which is stored with the callback: every later pass, and a
task's function, derives it again.

Only a token's SHA-256 is stored; the token travels only where the steps put it (a
mail, a webhook). The base URL of `ctx.callback.url` is deployment configuration, not
run state: whoever runs passes (the Lambda plumbing, `wfr`, the console) sets it around
the engine call with `callback_links`, so that pass code needs no extra argument.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import InvalidInput

TOKEN_PREFIX = "wfrcb_"
# What CALLBACK_BASE_URL may be: an http(s) URL without query or fragment.
BASE_URL_PATTERN = r"^https?://[^\s/?#]+(/[^\s?#]*)?$"
_TOKEN_TEXT = re.compile(r"wfrcb_[A-Za-z0-9_-]{43}")
_base_url: ContextVar[str | None] = ContextVar("callback_base_url", default=None)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def new_run_secret() -> str:
    """32 random bytes, base64url: the key a run's callback tokens are derived with."""
    return _b64(os.urandom(32))


def mint_token(secret: str | None, seed: str, ordinal: int) -> str:
    """The token of the `ordinal`-th callback of the pass with `seed` (random when the
    run has no secret)."""
    if secret is None:
        return TOKEN_PREFIX + _b64(os.urandom(32))
    return derived_token(secret, f"{seed}|callback|{ordinal}")


def created_mint(seed: str, ordinal: int) -> str:
    """What the token of the `ordinal`-th create_callback of the pass with `seed` is
    derived from: stored with the callback, so that later passes (and tasks) derive the
    same token again with the run's secret; useless without it."""
    return f"{seed}|create|{ordinal}"


def derived_token(secret: str, mint: str) -> str:
    """The token the run's `secret` derives from `mint`."""
    digest = hmac.new(secret.encode(), mint.encode(), hashlib.sha256).digest()
    return TOKEN_PREFIX + _b64(digest)


def token_hash(token: str) -> str:
    """What is stored of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def is_token(text: str) -> bool:
    """Whether `text` has the shape of a callback token (it may still be unknown)."""
    return bool(_TOKEN_TEXT.fullmatch(text))


def tokens_in(text: str) -> list[str]:
    """Every callback token in a text (a mail body, a webhook body), in order."""
    return _TOKEN_TEXT.findall(text)


def checked_base_url(value: str | None) -> str | None:
    """CALLBACK_BASE_URL as configured (None when unset or empty).

    Raises:
        InvalidInput: it is not an http(s) URL without query or fragment.
    """
    if not value:
        return None
    if not re.fullmatch(BASE_URL_PATTERN, value):
        raise InvalidInput(
            f"CALLBACK_BASE_URL: {value!r} is not an http(s) URL without query or fragment "
            "(the token is appended to it)"
        )
    return value


def callback_base_url() -> str | None:
    """The base URL callback links are made with here (None: no endpoint configured)."""
    return _base_url.get()


@contextmanager
def callback_links(base_url: str | None) -> Iterator[None]:
    """Make `ctx.callback.url` `base_url` + token for the passes run inside."""
    if base_url and not base_url.endswith("/"):
        base_url += "/"
    reset = _base_url.set(base_url or None)
    try:
        yield
    finally:
        _base_url.reset(reset)


class Callback:
    """`ctx.callback` where no pass hands out a token (in a task's function): both None."""

    @property
    def token(self) -> str | None:
        """The token that completes the wait_for_callback this pass reaches next."""
        return None

    @property
    def url(self) -> str | None:
        """The endpoint's URL for that token (None where no endpoint is configured)."""
        return None


NO_CALLBACK = Callback()


class CreatedCallbackLink(Callback):
    """`ctx.callbacks[name]`: the token of a callback a create_callback step made, and
    the endpoint's URL for it."""

    def __init__(self, token: str, base_url: str | None) -> None:
        self._token = token
        self._base_url = base_url

    @property
    def token(self) -> str:
        return self._token

    @property
    def url(self) -> str | None:
        return None if self._base_url is None else self._base_url + self._token


class PassCallback(Callback):
    """`ctx.callback` in a pass: the token of the wait_for_callback the pass reaches
    next, minted the first time a step reads it (or when the wait is reached).

    `depth` tells how many retry attempts enclose the step running now, so that a token
    handed out inside an attempt that failed can be forgotten (see forget_from).
    """

    def __init__(
        self,
        secret: str | None,
        seed: str,
        base_url: str | None,
        depth: Callable[[], int] = lambda: 0,
    ) -> None:
        self._secret = secret
        self._seed = seed
        self._base_url = base_url
        self._depth = depth
        self._ordinal = 0
        self._token: str | None = None
        self._minted_at = 0

    @property
    def token(self) -> str:
        if self._token is None:
            self._token = mint_token(self._secret, self._seed, self._ordinal)
            self._minted_at = self._depth()
        return self._token

    @property
    def url(self) -> str | None:
        token = self.token  # handed out even where no endpoint is configured
        return None if self._base_url is None else self._base_url + token

    @property
    def handed_out(self) -> bool:
        """A step read a token that no wait_for_callback has taken yet."""
        return self._token is not None

    def forget_from(self, depth: int) -> None:
        """A retry attempt at `depth` failed: a token handed out inside it goes with it
        (the attempt's steps run again in a later pass, handing out a new one)."""
        if self._token is not None and self._minted_at >= depth:
            self._token = None

    def take(self) -> str:
        """The token the wait_for_callback just reached waits on; the next one gets a
        new token."""
        token = self.token
        self._token = None
        self._ordinal += 1
        return token
