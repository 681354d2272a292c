"""The AWS runtime: ports built from the function's settings on first use."""

from __future__ import annotations

from collections.abc import Sequence

from ..clock import SystemClock
from ..errors import InvalidInput
from ..ports import ResumeRequest, Runtime, set_runtime_factory
from ..settings import Settings, get_settings
from ..webhook_guard import WebhookGuard
from .connection import ConnectionCache, fetch_secret_string
from .ports import LambdaNudger, PinnedHttpSender, SesMailer, SqsResumeQueue
from .versions import FORWARD_READ_TIMEOUT_S, LambdaInvoker


class UnconfiguredQueue:
    """Stands in when RESUME_QUEUE_URL is not set: using it is a configuration error."""

    def send(self, requests: Sequence[ResumeRequest]) -> list[ResumeRequest]:
        raise InvalidInput("RESUME_QUEUE_URL is not set: this function cannot enqueue resumes")


def build_aws_runtime(settings: Settings | None = None) -> Runtime:
    """The runtime of a Lambda function: SQS, Lambda, SES, pinned HTTPS, cached DB, and
    kept code: the function versions registered in the database, reached by invoke."""
    # Only in Lambda (and tests with moto); the local runtime never needs it.
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    settings = settings or get_settings()
    session = boto3.session.Session(region_name=settings.aws_region)
    fetch = None
    if not settings.database_url:
        fetch = fetch_secret_string(session.client("secretsmanager"))
    connections = ConnectionCache(settings, fetch)
    guard = WebhookGuard(settings.webhook_allow_hosts)
    queue = (
        SqsResumeQueue(
            session.client("sqs"), settings.resume_queue_url, settings.resume_hold_seconds
        )
        if settings.resume_queue_url
        else UnconfiguredQueue()
    )
    return Runtime(
        clock=SystemClock(),
        store=connections.store,
        resume_queue=queue,
        nudger=LambdaNudger(
            session.client("lambda"),
            settings.pending_projection_function,
            settings.step_dispatcher_function,
        ),
        mailer=SesMailer(session.client("ses")),
        http=PinnedHttpSender(guard),
        settings=settings,
        webhook_guard=guard,
        reconnect=connections.invalidate,
        # Handed-on work waits for its answer and is never retried by the client.
        invoker=LambdaInvoker(
            session.client(
                "lambda",
                config=Config(
                    read_timeout=FORWARD_READ_TIMEOUT_S, retries={"total_max_attempts": 1}
                ),
            )
        ),
    )


def install() -> None:
    """Make the AWS runtime the default (built lazily by get_runtime())."""
    set_runtime_factory(build_aws_runtime)
