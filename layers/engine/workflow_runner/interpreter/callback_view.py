"""The created callbacks a pass sees (`ctx.callbacks`, await_callback): those earlier
passes of the run made, read once when a step first needs them, and those the pass
makes itself. Pure: the read is the engine's function."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime

from ..callback_tokens import Callback, CreatedCallbackLink, created_mint, derived_token, token_hash
from ..pass_result import (
    CallbackNotCreated,
    CallbackSecretMissing,
    CreatedCallback,
    KnownCallback,
)
from ..stream import Path

# How a pass reads the created callbacks of its run that earlier passes made.
LoadCallbacks = Callable[[], Sequence[KnownCallback]]


class PassCallbacks:
    """The run's created callbacks during one pass.

    Args:
        secret: the run's key for tokens (None: a run started before its workflow made
            callbacks; creating one then fails).
        seed: the pass's dispatch seed (a repeated or redriven pass mints the same
            tokens).
        base_url: the callback endpoint's URL (None: links are None).
        load: reads those earlier passes made (None: there are none, a run's start).
    """

    def __init__(
        self, secret: str | None, seed: str, base_url: str | None, load: LoadCallbacks | None
    ) -> None:
        self._secret = secret
        self._seed = seed
        self._base_url = base_url
        self._load = load
        self._earlier: dict[str, KnownCallback] | None = None
        self._mine: dict[str, KnownCallback] = {}
        self.made: list[CreatedCallback] = []
        self.closed: list[tuple[str, str]] = []  # (token hash, timer) an await found expired

    def _earlier_ones(self) -> dict[str, KnownCallback]:
        if self._earlier is None:
            self._earlier = {c.name: c for c in self._load()} if self._load else {}
        return self._earlier

    def find(self, name: str) -> KnownCallback | None:
        """Callback `name`: made by this pass, else by an earlier one (None: never)."""
        return self._mine.get(name) or self._earlier_ones().get(name)

    def names(self) -> list[str]:
        return sorted({*self._mine, *self._earlier_ones()})

    def create(
        self,
        name: str,
        path: Path,
        timeout_at: datetime,
        heartbeat_seconds: int | None,
        now: datetime,
    ) -> CreatedCallback:
        """Make callback `name` (a name made before in this pass is superseded).

        Raises:
            CallbackSecretMissing: the run has no secret to derive the token with.
        """
        if self._secret is None:
            raise CallbackSecretMissing()
        mint = created_mint(self._seed, len(self.made))
        hashed = token_hash(derived_token(self._secret, mint))
        self.made = [
            dataclasses.replace(c, superseded=True) if c.name == name else c for c in self.made
        ]
        made = CreatedCallback(name, hashed, mint, path, timeout_at, heartbeat_seconds)
        self.made.append(made)
        self._mine[name] = KnownCallback(name, hashed, mint, timeout_at, heartbeat_seconds, now)
        return made

    def link(self, name: str) -> Callback:
        """`ctx.callbacks[name]`: its token and link.

        Raises:
            CallbackNotCreated: no callback of that name was made.
            CallbackSecretMissing: the run has no secret to derive its token with.
        """
        known = self.find(name)
        if known is None:
            raise CallbackNotCreated(name, self.names())
        if self._secret is None or known.mint is None:
            raise CallbackSecretMissing()
        return CreatedCallbackLink(derived_token(self._secret, known.mint), self._base_url)


class CallbackNames(Mapping[str, Callback]):
    """`ctx.callbacks` in a pass: the created callbacks by name."""

    def __init__(self, callbacks: PassCallbacks) -> None:
        self._callbacks = callbacks

    def __getitem__(self, name: str) -> Callback:
        return self._callbacks.link(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._callbacks.names())

    def __len__(self) -> int:
        return len(self._callbacks.names())


def created_links(
    secret: str | None, base_url: str | None, known: Sequence[KnownCallback]
) -> Mapping[str, Callback]:
    """`ctx.callbacks` outside a pass (a task's function): the run's created callbacks."""
    callbacks = PassCallbacks(secret, "", base_url, lambda: known)
    return CallbackNames(callbacks)
