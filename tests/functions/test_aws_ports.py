"""The AWS side of the ports, against moto (SQS, SES, Secrets Manager) and botocore's
Stubber (Lambda invoke: moto cannot run a function without Docker), plus the settings
and the connection cache on the real test database."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import psycopg
import pytest
from botocore.stub import Stubber
from psycopg.conninfo import conninfo_to_dict
from workflow_runner.aws.connection import ConnectionCache, fetch_secret_string
from workflow_runner.aws.ports import LambdaNudger, PinnedHttpSender, SesMailer, SqsResumeQueue
from workflow_runner.aws.runtime import UnconfiguredQueue, build_aws_runtime
from workflow_runner.errors import InvalidInput
from workflow_runner.ports import PermanentDeliveryError, ResumeRequest
from workflow_runner.settings import Settings

from tests.support import SAMPLE_TENANT as TENANT
from tests.support import fake_aws

REGION = "eu-central-1"
RUN = "20674095-dda5-5811-b700-b57eb304d119"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with fake_aws(monkeypatch, REGION):
        yield


# --- SQS -------------------------------------------------------------------------------


def test_sqs_queue_sends_batches_with_delays_and_the_message_contract(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="resume")["QueueUrl"]
    queue = SqsResumeQueue(sqs, url)
    requests = [ResumeRequest(TENANT, RUN, i, delay_seconds=0) for i in range(23)]
    requests.append(ResumeRequest(TENANT, RUN, 99, delay_seconds=5000, force=True))
    assert queue.send(requests) == []
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert int(attributes["ApproximateNumberOfMessages"]) == 23
    assert int(attributes["ApproximateNumberOfMessagesDelayed"]) == 1  # clamped to 900 s
    bodies = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        bodies += [json.loads(m["Body"]) for m in batch]
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)
            ],
        )
    assert sorted(b["stepIndex"] for b in bodies) == list(range(23))
    assert bodies[0] == {"tenantId": TENANT, "runId": RUN, "stepIndex": bodies[0]["stepIndex"]}


def test_sqs_queue_sends_the_batches_of_a_broadcast_side_by_side() -> None:
    """Thousands of woken runs must not cost one SQS round trip after the other."""
    import threading
    import time

    class SlowSqs:
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.in_flight = self.most = self.calls = 0

        def send_message_batch(self, QueueUrl: str, Entries: list[Any]) -> dict[str, Any]:
            with self.lock:
                self.in_flight += 1
                self.calls += 1
                self.most = max(self.most, self.in_flight)
            time.sleep(0.02)
            with self.lock:
                self.in_flight -= 1
            return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}

    sqs = SlowSqs()
    requests = [ResumeRequest(TENANT, RUN, i) for i in range(500)]
    assert SqsResumeQueue(sqs, "https://example/q", senders=8).send(requests) == []
    assert sqs.calls == 50 and sqs.most > 1


def test_sqs_queue_returns_what_it_could_not_send(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    missing = f"https://sqs.{REGION}.amazonaws.com/123456789012/no-such-queue"
    requests = [ResumeRequest(TENANT, RUN, i) for i in range(12)]
    assert SqsResumeQueue(sqs, missing).send(requests) == requests


def test_sqs_queue_returns_entries_sqs_refused() -> None:
    sqs = boto3.client("sqs", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    url = f"https://sqs.{REGION}.amazonaws.com/123456789012/resume"
    requests = [ResumeRequest(TENANT, RUN, i) for i in range(3)]
    with Stubber(sqs) as stub:
        stub.add_response(
            "send_message_batch",
            {
                "Successful": [
                    {"Id": "0", "MessageId": "m0", "MD5OfMessageBody": "x"},
                    {"Id": "2", "MessageId": "m2", "MD5OfMessageBody": "x"},
                ],
                "Failed": [{"Id": "1", "SenderFault": False, "Code": "InternalError"}],
            },
        )
        assert SqsResumeQueue(sqs, url).send(requests) == [requests[1]]


# --- Lambda nudges ------------------------------------------------------------------------


def test_nudger_invokes_asynchronously_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    client = boto3.client(
        "lambda", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y"
    )
    nudger = LambdaNudger(client, "wfr-PendingProjection", "wfr-StepDispatcher")
    with Stubber(client) as stub:
        for name in ("wfr-PendingProjection", "wfr-StepDispatcher"):
            stub.add_response(
                "invoke",
                {"StatusCode": 202},
                {"FunctionName": name, "InvocationType": "Event", "Payload": b'{"source":"nudge"}'},
            )
        stub.add_client_error("invoke", "TooManyRequestsException")
        nudger.nudge_projection()
        nudger.nudge_dispatcher()
        with caplog.at_level(logging.WARNING):
            nudger.nudge_projection()  # throttled: logged, not raised
        stub.assert_no_pending_responses()
    assert "nudge of wfr-PendingProjection failed" in caplog.text
    LambdaNudger(client, None, None).nudge_projection()  # not configured: nothing to do


# --- SES -----------------------------------------------------------------------------------


def test_ses_mailer_sends_from_a_verified_sender(aws: None) -> None:
    ses = boto3.client("ses", region_name=REGION)
    ses.verify_email_identity(EmailAddress="noreply@example.com")
    message_id = SesMailer(ses).send_mail(
        "req-1", "noreply@example.com", ["ada@example.com"], "Welcome!", "Hello Ada"
    )
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ses.models import ses_backends

    (sent,) = ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages
    assert sent.id == message_id
    assert (sent.source, sent.destinations["ToAddresses"], sent.subject) == (
        "noreply@example.com",
        ["ada@example.com"],
        "Welcome!",
    )


def test_ses_rejection_is_permanent(aws: None) -> None:
    ses = boto3.client("ses", region_name=REGION)
    with pytest.raises(PermanentDeliveryError, match="MessageRejected"):
        SesMailer(ses).send_mail("req-1", "unverified@example.com", ["a@example.com"], "s", "b")


# --- settings ---------------------------------------------------------------------------------


def test_settings_parse_the_environment() -> None:
    settings = Settings.from_env(
        {
            "DB_SECRET_ARN": "arn:aws:secretsmanager:eu-central-1:123456789012:secret:db",
            "DB_HOST": "cluster.example",
            "WEBHOOK_ALLOW_HOSTS": " Hooks.Internal , other.local,",
            "DUE_SCAN_BATCH": "250",
            "TENANT_ID_PATH": "meta.tenant",
            "MAIL_SENDER": "",
            "CALLBACK_BASE_URL": "https://abc.lambda-url.eu-central-1.on.aws/",
        }
    )
    assert settings.webhook_allow_hosts == frozenset({"hooks.internal", "other.local"})
    assert (settings.due_scan_batch, settings.tenant_id_path) == (250, "meta.tenant")
    assert (settings.db_sslmode, settings.mail_sender) == ("require", None)
    assert settings.resume_lease_seconds > 900 + 180  # outlasts the longest delay + visibility
    assert settings.callback_base_url == "https://abc.lambda-url.eu-central-1.on.aws/"


def test_fairness_settings_default_to_a_share_without_cap_and_parse_from_env() -> None:
    default = Settings(database_url="postgresql:///x")
    assert (default.due_scan_tenant_queue_seconds, default.tenant_max_in_flight) == (0.5, 0)
    assert default.due_scan_wait_for_room is False  # the local runtime consumes afterwards
    settings = Settings.from_env(
        {
            "DATABASE_URL": "postgresql:///x",
            "TENANT_MAX_IN_FLIGHT": "25",
            "DUE_SCAN_TENANT_QUEUE_SECONDS": "0",
            "DUE_SCAN_WAIT_FOR_ROOM": "true",
        }
    )
    assert settings.tenant_max_in_flight == 25
    assert settings.due_scan_tenant_queue_seconds == 0
    assert settings.due_scan_wait_for_room is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "set DATABASE_URL, or DB_SECRET_ARN together with DB_HOST"),
        ({"DATABASE_URL": "postgresql:///x", "TENANT_MAX_IN_FLIGHT": "-1"}, "TENANT_MAX_IN_FLIGHT"),
        ({"DB_SECRET_ARN": "arn:x"}, "DB_SECRET_ARN together with DB_HOST"),
        ({"DATABASE_URL": "postgresql:///x", "DUE_SCAN_BATCH": "lots"}, "DUE_SCAN_BATCH"),
        ({"DATABASE_URL": "postgresql:///x", "TENANT_ID_PATH": "a..b"}, "TENANT_ID_PATH"),
        ({"DATABASE_URL": "postgresql:///x", "RESUME_LEASE_SECONDS": "10"}, "RESUME_LEASE_SECONDS"),
        ({"DATABASE_URL": "postgresql:///x", "CALLBACK_BASE_URL": "cb.io/"}, "CALLBACK_BASE_URL"),
        (
            {"DATABASE_URL": "postgresql:///x", "DB_PREPARED_STATEMENTS": "sometimes"},
            "DB_PREPARED_STATEMENTS",
        ),
        (
            {"DATABASE_URL": "postgresql:///x", "CALLBACK_BASE_URL": "https://cb.io/?t="},
            "CALLBACK_BASE_URL",
        ),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        Settings.from_env(env)


def test_aws_runtime_is_wired_from_settings(aws: None, db_url: str) -> None:
    runtime = build_aws_runtime(Settings(database_url=db_url))
    assert isinstance(runtime.resume_queue, UnconfiguredQueue)
    with pytest.raises(InvalidInput, match="RESUME_QUEUE_URL"):
        runtime.resume_queue.send([ResumeRequest(TENANT, RUN, 1)])
    assert isinstance(runtime.mailer, SesMailer) and isinstance(runtime.http, PinnedHttpSender)
    assert isinstance(runtime.nudger, LambdaNudger)
    store = runtime.store()
    store.ping()
    assert runtime.store() is store  # kept across (warm) invocations
    assert runtime.reconnect is not None
    runtime.reconnect()
    assert runtime.store() is not store


# --- connection cache ------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def secret_settings(aws: None, db_url: str) -> tuple[Settings, Any, list[str]]:
    parts = conninfo_to_dict(db_url)
    client = boto3.client("secretsmanager", region_name=REGION)
    arn = client.create_secret(
        Name="wfr-db", SecretString=json.dumps({"username": parts["user"], "password": "pw'\\x"})
    )["ARN"]
    fetched: list[str] = []
    fetch = fetch_secret_string(client)

    def counting(secret_arn: str) -> str:
        fetched.append(secret_arn)
        return fetch(secret_arn)

    settings = Settings(
        db_secret_arn=arn,
        db_host=str(parts["host"]),
        db_name=str(parts["dbname"]),
        db_port=int(parts.get("port") or 5432),
        db_secret_ttl_seconds=300,
    )
    return settings, counting, fetched


def test_connection_from_secret_is_kept_and_the_secret_cached(
    secret_settings: tuple[Settings, Any, list[str]],
) -> None:
    settings, fetch, fetched = secret_settings
    clock = Clock()
    cache = ConnectionCache(settings, fetch, ping_after_idle_seconds=30, monotonic=clock)
    first = cache.store()
    row = first.conn.execute("SELECT current_setting('application_name') AS app").fetchone()
    assert row == {"app": "workflow-runner"}
    assert cache.store() is first and cache.connects == 1
    cache.invalidate()
    cache.store()
    assert (cache.connects, len(fetched)) == (2, 1)  # secret cached within its TTL
    clock.t += 301
    cache.invalidate()
    cache.store()
    assert len(fetched) == 2  # refetched after the TTL (a rotation is picked up)
    cache.invalidate()


def test_connection_is_reestablished_after_the_server_drops_it(
    db_url: str, pg_server_url: str
) -> None:
    clock = Clock()
    cache = ConnectionCache(Settings(database_url=db_url), None, 30, clock)
    store = cache.store()
    pid = store.conn.info.backend_pid
    with psycopg.connect(pg_server_url, autocommit=True) as admin:  # a failover, in effect
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    clock.t += 31  # idle long enough to be checked before use
    fresh = cache.store()
    assert fresh is not store and cache.connects == 2
    assert fresh.conn.info.backend_pid != pid
    fresh.ping()
    cache.invalidate()


def test_closed_connection_is_replaced_without_a_ping(db_url: str) -> None:
    cache = ConnectionCache(Settings(database_url=db_url), None, 3600, Clock())
    store = cache.store()
    store.conn.close()
    assert cache.store() is not store and cache.connects == 2
    cache.invalidate()


def test_malformed_secret_is_a_clear_error(aws: None) -> None:
    client = boto3.client("secretsmanager", region_name=REGION)
    arn = client.create_secret(Name="bad", SecretString=json.dumps({"user": "x"}))["ARN"]
    settings = Settings(db_secret_arn=arn, db_host="db.example")
    with pytest.raises(InvalidInput, match="must hold 'username' and 'password'"):
        ConnectionCache(settings, fetch_secret_string(client)).store()
