"""A database connection kept across warm Lambda invocations.

One connection per execution environment (Lambda runs one invocation at a time per
environment), checked before use and re-established after a failover. Credentials
come from Secrets Manager (cached for a while, refetched when a login fails, which
is what a rotation looks like); ``DATABASE_URL`` overrides everything for local use.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from ..errors import InvalidInput, StoreError, TransientStoreError
from ..settings import Settings
from ..store import Store, connect

log = logging.getLogger("workflow_runner.aws")

SecretFetcher = Callable[[str], str]


def _quote(value: str) -> str:
    """Quote a conninfo value (libpq: single quotes, backslash escapes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fetch_secret_string(client: Any) -> SecretFetcher:
    """A fetcher reading a secret's SecretString with a boto3 Secrets Manager client."""

    def fetch(arn: str) -> str:
        return str(client.get_secret_value(SecretId=arn)["SecretString"])

    return fetch


class ConnectionCache:
    """Hands out a healthy Store, reconnecting when the cached one is gone.

    Args:
        settings: where the database is.
        fetch_secret: reads a secret's string by ARN (only needed without DATABASE_URL).
        ping_after_idle_seconds: a connection idle this long is pinged before use; a
            fresh one is trusted (a ping per invocation would cost a round trip each).
        monotonic: time source for the idle and secret-age checks.
    """

    def __init__(
        self,
        settings: Settings,
        fetch_secret: SecretFetcher | None = None,
        ping_after_idle_seconds: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._fetch_secret = fetch_secret
        self._ping_after = ping_after_idle_seconds
        self._monotonic = monotonic
        self._store: Store | None = None
        self._last_used = 0.0
        self._secret: dict[str, Any] | None = None
        self._secret_at = 0.0
        self.connects = 0  # how many connections were opened (observability and tests)

    def store(self) -> Store:
        """A Store on a healthy connection (opening or re-opening one as needed).

        Raises:
            TransientStoreError: the database cannot be reached.
            InvalidInput: the secret is malformed.
        """
        now = self._monotonic()
        current = self._store
        if current is not None and not current.closed and now - self._last_used >= self._ping_after:
            try:
                current.ping()
            except StoreError:
                log.warning("cached database connection failed its health check; reconnecting")
                self.invalidate()
        if self._store is None or self._store.closed:
            self.invalidate()
            self._store = self._open()
            self.connects += 1
        self._last_used = now
        return self._store

    def invalidate(self) -> None:
        """Drop the cached connection (after a transient error: a failover, a restart)."""
        if self._store is not None:
            # Closing a broken connection may fail; it is gone either way.
            with contextlib.suppress(Exception):
                self._store.close()
        self._store = None

    def _open(self) -> Store:
        s = self._settings

        def open_(url: str) -> Store:
            return connect(
                url,
                statement_timeout_seconds=s.db_statement_timeout_seconds,
                idle_in_transaction_timeout_seconds=s.db_idle_in_transaction_timeout_seconds,
                prepared_statements=s.db_prepared_statements,
            )

        if s.database_url:
            return open_(s.database_url)
        try:
            return open_(self._url(refresh=False))
        except TransientStoreError:
            raise
        except StoreError:
            # A rejected login usually means the secret was rotated: refetch once.
            return open_(self._url(refresh=True))

    def _url(self, refresh: bool) -> str:
        """A libpq key/value conninfo (works for host names and socket directories)."""
        secret = self._credentials(refresh)
        s = self._settings
        params = {
            "host": s.db_host or str(secret.get("host") or ""),
            "port": str(s.db_port),
            "dbname": s.db_name,
            "user": str(secret["username"]),
            "password": str(secret["password"]),
            "sslmode": s.db_sslmode,
            "connect_timeout": str(s.db_connect_timeout_seconds),
            "application_name": "workflow-runner",
        }
        return " ".join(f"{key}={_quote(value)}" for key, value in params.items())

    def _credentials(self, refresh: bool) -> dict[str, Any]:
        arn = self._settings.db_secret_arn
        if arn is None or self._fetch_secret is None:
            raise InvalidInput("no DATABASE_URL and no way to read DB_SECRET_ARN")
        age = self._monotonic() - self._secret_at
        if refresh or self._secret is None or age >= self._settings.db_secret_ttl_seconds:
            try:
                secret = json.loads(self._fetch_secret(arn))
            except json.JSONDecodeError as error:
                raise InvalidInput(f"secret {arn} is not JSON") from error
            if not isinstance(secret, dict) or "username" not in secret or "password" not in secret:
                raise InvalidInput(f"secret {arn} must hold 'username' and 'password'")
            self._secret = secret
            self._secret_at = self._monotonic()
        return self._secret
