"""Function settings, parsed from the environment at first use (never at import)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .callback_tokens import BASE_URL_PATTERN
from .errors import InvalidInput
from .retention import DEFAULT_RETENTION, Retention, describe_retention, parse_retention

# Environment variable -> field. Upper-case snake names, as the template sets them.
_ENV_FIELDS = {
    "DATABASE_URL": "database_url",
    "DB_SECRET_ARN": "db_secret_arn",
    "DB_HOST": "db_host",
    "DB_PORT": "db_port",
    "DB_NAME": "db_name",
    "DB_SSLMODE": "db_sslmode",
    "DB_CONNECT_TIMEOUT_SECONDS": "db_connect_timeout_seconds",
    "DB_SECRET_TTL_SECONDS": "db_secret_ttl_seconds",
    "DB_STATEMENT_TIMEOUT_SECONDS": "db_statement_timeout_seconds",
    "DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "db_idle_in_transaction_timeout_seconds",
    "DB_PREPARED_STATEMENTS": "db_prepared_statements",
    "RESUME_QUEUE_URL": "resume_queue_url",
    "PENDING_PROJECTION_FUNCTION": "pending_projection_function",
    "STEP_DISPATCHER_FUNCTION": "step_dispatcher_function",
    "MAIL_SENDER": "mail_sender",
    "TENANT_ID_PATH": "tenant_id_path",
    "WORKFLOW_MODULES": "workflow_modules",
    "WEBHOOK_ALLOW_HOSTS": "webhook_allow_hosts",
    "WEBHOOK_TIMEOUT_SECONDS": "webhook_timeout_seconds",
    "DISPATCH_MAX_ATTEMPTS": "dispatch_max_attempts",
    "DISPATCH_BUDGET_SECONDS": "dispatch_budget_seconds",
    "DUE_SCAN_BUDGET_SECONDS": "due_scan_budget_seconds",
    "DUE_SCAN_HORIZON_SECONDS": "due_scan_horizon_seconds",
    "DUE_SCAN_BATCH": "due_scan_batch",
    "DUE_SCAN_TENANT_QUEUE_SECONDS": "due_scan_tenant_queue_seconds",
    "DUE_SCAN_WAIT_FOR_ROOM": "due_scan_wait_for_room",
    "TENANT_MAX_IN_FLIGHT": "tenant_max_in_flight",
    "RESUME_LEASE_SECONDS": "resume_lease_seconds",
    "PROJECTION_LINGER_MS": "projection_linger_ms",
    "LOG_EXCEPTION_TEXT": "log_exception_text",
    "CALLBACK_BASE_URL": "callback_base_url",
    "RESUME_HOLD_SECONDS": "resume_hold_seconds",
    "RUN_RETENTION": "run_retention",
    "STRANDED_RUNS_POLICY": "stranded_runs_policy",
    "PURGE_BATCH_SIZE": "purge_batch_size",
    "PURGE_MAX_SECONDS": "purge_max_seconds",
    "AWS_REGION": "aws_region",
}


class Settings(BaseModel):
    """Everything the functions read from their environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str | None = None
    db_secret_arn: str | None = None
    db_host: str | None = None
    db_port: int = Field(default=5432, ge=1, le=65535)
    db_name: str = "workflow_runner"
    # Aurora: TLS always; the URL in DATABASE_URL decides for itself.
    db_sslmode: str = "require"
    db_connect_timeout_seconds: int = Field(default=5, ge=1, le=60)
    db_secret_ttl_seconds: int = Field(default=300, ge=0, le=86400)
    # Bounds on the engine's own sessions (0: the server's default): an engine
    # transaction holds the pending projection back while it is open (store/database.py).
    db_statement_timeout_seconds: float = Field(default=60.0, ge=0, le=3600)
    db_idle_in_transaction_timeout_seconds: float = Field(default=60.0, ge=0, le=3600)
    # Server-side prepared statements for the statements a connection runs often (about
    # a third of the database's CPU per resume); off for a proxy they would pin.
    db_prepared_statements: bool = True
    resume_queue_url: str | None = None
    pending_projection_function: str | None = None
    step_dispatcher_function: str | None = None
    mail_sender: str | None = None
    tenant_id_path: str = Field(default="tenantId", pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
    workflow_modules: str = "sample_workflows"
    # What a deploy does when its code would fail waiting runs (Migrate's check): "warn"
    # logs them and goes on, "fail" fails the deploy (CloudFormation rolls it back).
    stranded_runs_policy: Literal["warn", "fail"] = "warn"
    webhook_allow_hosts: frozenset[str] = frozenset()
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    dispatch_max_attempts: int = Field(default=5, ge=1, le=50)
    dispatch_budget_seconds: float = Field(default=50.0, gt=0, le=900)
    due_scan_budget_seconds: float = Field(default=45.0, gt=0, le=900)
    due_scan_horizon_seconds: int = Field(default=60, ge=0, le=900)
    due_scan_batch: int = Field(default=500, ge=1, le=10000)
    # Fairness: a tenant's due rows in flight are held to what its consumers resume in
    # this many seconds, so another tenant's run waits about that long behind a backlog
    # (0: no bound, a backlog goes to the queue at once).
    due_scan_tenant_queue_seconds: float = Field(default=0.5, ge=0, le=60)
    # The scan keeps topping tenants up while its consumers run (DueScan in AWS); a scan
    # whose consumers run only after it returns (the local runtime) ends instead.
    due_scan_wait_for_room: bool = False
    # An operator's cap on a tenant's rows in flight (queued or being resumed; 0: none).
    tenant_max_in_flight: int = Field(default=0, ge=0, le=1_000_000)
    # Longer than the longest SQS delay (900 s) plus the resume queue's visibility
    # timeout (200 s): a row in flight is not handed out again before its message
    # was either processed or given up on.
    resume_lease_seconds: int = Field(default=1200, ge=60, le=43200)
    # PendingProjection starts its catch-ups at least this long apart (per warm
    # container), so a steady stream of passes is projected in batches, not one by one
    # (engine.projection.CatchUpPacer; 0: every nudge catches up at once).
    projection_linger_ms: int = Field(default=50, ge=0, le=5000)
    # Exception text of user code and providers in log lines (redaction.py): only the
    # class and a short hash unless the operator opts in.
    log_exception_text: bool = False
    # The callback endpoint's URL: `ctx.callback.url` is this plus the token.
    callback_base_url: str | None = Field(default=None, pattern=BASE_URL_PATTERN)
    # Timers to the second: resume requests are sent to arrive up to this early and
    # ResumeRun holds them until due (0: sent rounded up, up to a second late).
    resume_hold_seconds: float = Field(default=1.0, ge=0, le=5)
    # How long settled runs are kept before the purge deletes them (retention.py):
    # a duration of at least an hour (P30D, 30d), or "forever"; workflows may set their own.
    run_retention: str = describe_retention(DEFAULT_RETENTION)
    # The purge after each due scan: runs per transaction, and its time budget (0: the
    # due scan does not purge; `wfr purge` still does).
    purge_batch_size: int = Field(default=500, ge=1, le=10000)
    purge_max_seconds: float = Field(default=5.0, ge=0, le=60)
    aws_region: str | None = None

    @field_validator("run_retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        try:
            parse_retention(value)
        except InvalidInput as error:
            raise ValueError(str(error)) from None
        return value

    @property
    def default_retention(self) -> Retention:
        """RUN_RETENTION parsed (None: forever)."""
        return parse_retention(self.run_retention)

    @field_validator("webhook_allow_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            return frozenset(h.strip().lower() for h in value.split(",") if h.strip())
        return value

    @model_validator(mode="after")
    def _database_configured(self) -> Settings:
        if not self.database_url and not (self.db_secret_arn and self.db_host):
            raise ValueError(
                "set DATABASE_URL, or DB_SECRET_ARN together with DB_HOST (and DB_NAME)"
            )
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Parse the settings from environment variables (empty values count as unset).

        Raises:
            InvalidInput: a variable has an invalid value; the message names it.
        """
        env = os.environ if environ is None else environ
        values = {field: env[name] for name, field in _ENV_FIELDS.items() if env.get(name)}
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            names = {field: name for name, field in _ENV_FIELDS.items()}
            problems = []
            for item in error.errors():
                field = str(item["loc"][0]) if item["loc"] else ""
                problems.append(f"{names.get(field, 'environment')}: {item['msg']}")
            raise InvalidInput("invalid function settings: " + "; ".join(problems)) from error


_cached: Settings | None = None


def get_settings() -> Settings:
    """The process's settings, parsed on first use and cached for warm invocations."""
    global _cached
    if _cached is None:
        _cached = Settings.from_env()
    return _cached
