"""The test kit's side of a callback: complete, fail or beat it as the outside system
would through the callback endpoint, and run what follows at once."""

from __future__ import annotations

from typing import Any

from ..callback_tokens import is_token, tokens_in
from ..json_input import check_json_value
from ..local.runtime import LocalRuntime
from ..storable import DEFAULT_MAX_RESULT_BYTES


def _one_token(text: str, where: str) -> str:
    """The token in `text` (a token, or a mail body or link holding exactly one)."""
    found = [text] if is_token(text) else tokens_in(text)
    if len(found) != 1:
        raise ValueError(
            f"{where}: expected one callback token (wfrcb_...), found {len(found)} in {text[:80]!r}"
        )
    return found[0]


class CallbackAnswers:
    """`env.complete_callback`, `env.fail_callback` and `env.heartbeat_callback` (mixed
    into WorkflowTestEnv)."""

    @property
    def runtime(self) -> LocalRuntime:
        raise NotImplementedError  # WorkflowTestEnv.runtime

    def complete_callback(self, token: str, payload: Any) -> None:
        """Complete a callback as an outside system would through the callback endpoint,
        and run what follows at once (the resumed pass, its mail, webhooks).

        Args:
            token: the token, or the text that carried it to the outside system (a mail
                body, a link, a webhook body) holding exactly one.
            payload: the JSON the outside system sends (None: no payload); it lands
                under the wait's result key.

        Raises:
            ValueError: `token` holds no token, or several.
            CallbackRefused: unknown token, answered before, expired, or the run moved on.
            InvalidInput: the payload is not JSON, too large (256 KB) or nested too
                deeply (100 levels).
        """
        check_json_value(
            payload, "complete_callback(payload=...)", max_bytes=DEFAULT_MAX_RESULT_BYTES
        )
        self.runtime.complete_callback(_one_token(token, "complete_callback"), payload, "tests")

    def fail_callback(self, token: str, *, error: str, message: str | None = None) -> None:
        """Report that a callback's work failed, as an outside system would through the
        callback endpoint (`…/fail`), and run what follows at once: the wait fails its
        run (reason callback_failed), or with catch=True finds `{"failed": True,
        "error": error}` under its key. `message` is only logged, never stored.

        Raises:
            ValueError: `token` holds no token, or several.
            CallbackRefused: unknown token, answered before, expired, or the run moved on.
            InvalidInput: `error` is not 1 to 64 letters, digits and `_.:-`, or `message`
                is over 2000 characters or holds control characters.
        """
        self.runtime.fail_callback(_one_token(token, "fail_callback"), error, message, "tests")

    def heartbeat_callback(self, token: str) -> None:
        """Send a callback's heartbeat, as an outside system would (`…/heartbeat`): its
        step's heartbeat interval starts again from now.

        Raises:
            ValueError: `token` holds no token, or several.
            CallbackRefused: unknown token, answered before, expired, the run moved on,
                or its step names no heartbeat interval.
        """
        self.runtime.heartbeat_callback(_one_token(token, "heartbeat_callback"))
