"""template.yaml, samconfig.toml and events/: the contract the deployment depends on."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from workflow_runner.aws.template import event_routes, functions, load_template, route

from tests.functions.helpers import EVENTS, ROOT, TEMPLATE, load_event

FUNCTIONS = {
    "TriggerProjectionFunction": "functions/trigger_projection/",
    "EventWakeupFunction": "functions/event_wakeup/",
    "PendingProjectionFunction": "functions/pending_projection/",
    "DueScanFunction": "functions/due_scan/",
    "ResumeRunFunction": "functions/resume_run/",
    "StepDispatcherFunction": "functions/step_dispatcher/",
    "MigrateFunction": "functions/migrate/",
}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template(TEMPLATE)


@pytest.fixture(scope="module")
def resources(template: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"]


def props(resources: dict[str, Any], name: str) -> dict[str, Any]:
    return resources[name]["Properties"]


def test_is_a_sam_template_with_the_contracted_function_ids(template: dict[str, Any]) -> None:
    assert template["Transform"] == "AWS::Serverless-2016-10-31"
    found = {name: r["Properties"]["CodeUri"] for name, r in functions(template).items()}
    assert found == FUNCTIONS
    for name, code_uri in FUNCTIONS.items():
        app = ROOT / code_uri / "app.py"
        assert "def handler(" in app.read_text(), name
        assert template["Resources"][name]["Properties"]["Handler"] == "app.handler"


def test_globals_runtime_layers_and_environment(template: dict[str, Any]) -> None:
    glob = template["Globals"]["Function"]
    assert glob["Runtime"] == "python3.11" and glob["Tracing"] == "Active"
    assert glob["Layers"] == [{"Ref": "EngineLayer"}, {"Ref": "SamplesLayer"}]
    env = glob["Environment"]["Variables"]
    for name in (
        "DB_SECRET_ARN",
        "DB_HOST",
        "DB_NAME",
        "TENANT_ID_PATH",
        "WORKFLOW_MODULES",
        "RESUME_QUEUE_URL",
        "POWERTOOLS_METRICS_NAMESPACE",
        "POWERTOOLS_SERVICE_NAME",
    ):
        assert name in env, name
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "WorkflowRunner"
    assert env["DB_SSLMODE"] == "require"
    for resource in functions(template).values():
        for name in (resource["Properties"].get("Environment") or {}).get("Variables") or {}:
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), name  # no CamelCase env names


def test_layers_are_built_with_python311(resources: dict[str, Any]) -> None:
    for name, uri in (("EngineLayer", "layers/engine"), ("SamplesLayer", "layers/samples")):
        assert resources[name]["Type"] == "AWS::Serverless::LayerVersion"
        assert props(resources, name)["ContentUri"] == uri
        assert resources[name]["Metadata"]["BuildMethod"] == "python3.11"
        assert (ROOT / uri / "requirements.txt").exists()
    engine_requirements = (ROOT / "layers/engine/requirements.txt").read_text()
    assert "aws-lambda-powertools" in engine_requirements and "psycopg" in engine_requirements


def test_every_parameter_is_constrained(template: dict[str, Any]) -> None:
    for name, spec in template["Parameters"].items():
        if spec["Type"] == "CommaDelimitedList":
            continue  # lists of ids or sources; validated by the Rules section
        constrained = {"AllowedValues", "AllowedPattern", "MinValue", "MaxValue"} & set(spec)
        assert constrained, f"parameter {name} has no constraint"
        assert spec.get("Description"), name


def test_resume_queue_has_a_dlq_and_run_resume_reports_partial_failures(
    resources: dict[str, Any], template: dict[str, Any]
) -> None:
    queue = props(resources, "ResumeQueue")
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": ["ResumeDeadLetterQueue", "Arn"]},
        "maxReceiveCount": 5,
    }
    resume = props(resources, "ResumeRunFunction")
    timeout = resume.get("Timeout", template["Globals"]["Function"]["Timeout"])
    assert queue["VisibilityTimeout"] >= 6 * timeout
    (source,) = resume["Events"].values()
    assert source["Type"] == "SQS"
    assert source["Properties"]["Queue"] == {"Fn::GetAtt": ["ResumeQueue", "Arn"]}
    assert source["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    reserved = {"Ref": "ResumeRunReservedConcurrency"}
    assert resume["ReservedConcurrentExecutions"] == reserved
    # Pollers capped at the reservation: messages are never throttled into the DLQ.
    assert source["Properties"]["ScalingConfig"]["MaximumConcurrency"] == reserved
    lease = int(template["Globals"]["Function"]["Environment"]["Variables"]["RESUME_LEASE_SECONDS"])
    assert lease > 900 + queue["VisibilityTimeout"]


@pytest.mark.parametrize("name", ["TriggerProjectionFunction", "EventWakeupFunction"])
def test_eventbridge_poison_events_end_in_the_events_dlq(
    resources: dict[str, Any], name: str
) -> None:
    function = props(resources, name)
    config = function["EventInvokeConfig"]
    assert 0 < config["MaximumRetryAttempts"] <= 2
    assert config["DestinationConfig"]["OnFailure"] == {
        "Type": "SQS",
        "Destination": {"Fn::GetAtt": ["EventsDeadLetterQueue", "Arn"]},
    }
    (rule,) = function["Events"].values()
    assert rule["Type"] == "EventBridgeRule"
    assert rule["Properties"]["DeadLetterConfig"] == {
        "Arn": {"Fn::GetAtt": ["EventsDeadLetterQueue", "Arn"]}
    }


def test_schedules(resources: dict[str, Any]) -> None:
    for name in ("DueScanFunction", "PendingProjectionFunction", "StepDispatcherFunction"):
        schedules = [
            e for e in props(resources, name)["Events"].values() if e["Type"] == "Schedule"
        ]
        assert [s["Properties"]["Schedule"] for s in schedules] == ["rate(1 minute)"], name


def statements(resources: dict[str, Any], name: str) -> list[Any]:
    return props(resources, name).get("Policies", [])


def test_policies_are_least_privilege(resources: dict[str, Any]) -> None:
    secret = {
        "Fn::If": [
            "CreateDatabase",
            {"Fn::GetAtt": ["DatabaseCluster", "MasterUserSecret.SecretArn"]},
            {"Ref": "ExistingDbSecretArn"},
        ]
    }
    expected_templates = {
        "TriggerProjectionFunction": {"LambdaInvokePolicy"},
        "EventWakeupFunction": {"SQSSendMessagePolicy", "LambdaInvokePolicy"},
        "PendingProjectionFunction": {"SQSSendMessagePolicy"},
        "DueScanFunction": {"SQSSendMessagePolicy", "LambdaInvokePolicy"},
        "ResumeRunFunction": {"SQSSendMessagePolicy", "LambdaInvokePolicy"},
        "StepDispatcherFunction": set(),
        "MigrateFunction": set(),
    }
    for name, templates in expected_templates.items():
        policies = statements(resources, name)
        used = {key for p in policies for key in p if key != "Statement"}
        assert used == templates, name
        inline = [s for p in policies for s in p.get("Statement", [])]
        assert any(
            s["Action"] == "secretsmanager:GetSecretValue" and s["Resource"] == secret
            for s in inline
        ), name
        for statement in inline:
            actions = (
                statement["Action"]
                if isinstance(statement["Action"], list)
                else [statement["Action"]]
            )
            assert all("*" not in a for a in actions), (name, actions)
            assert statement["Resource"] != "*", name
    (ses,) = [
        s
        for p in statements(resources, "StepDispatcherFunction")
        for s in p.get("Statement", [])
        if "ses:SendEmail" in s["Action"]
    ]
    assert "ses:FromAddress" in ses["Condition"]["StringEquals"]


def test_nudging_functions_know_whom_to_nudge(resources: dict[str, Any]) -> None:
    for name in ("TriggerProjectionFunction", "DueScanFunction", "ResumeRunFunction"):
        env = props(resources, name)["Environment"]["Variables"]
        assert env["PENDING_PROJECTION_FUNCTION"] == {"Ref": "PendingProjectionFunction"}
        assert env["STEP_DISPATCHER_FUNCTION"] == {"Ref": "StepDispatcherFunction"}
    dispatcher_env = props(resources, "StepDispatcherFunction")["Environment"]["Variables"]
    assert dispatcher_env["MAIL_SENDER"] == {"Ref": "MailSender"}
    assert dispatcher_env["WEBHOOK_ALLOW_HOSTS"] == {"Ref": "WebhookAllowHosts"}


def test_migration_custom_resource(resources: dict[str, Any]) -> None:
    migration = resources["SchemaMigration"]
    assert migration["Type"].startswith("Custom::")
    assert migration["Properties"]["ServiceToken"] == {"Fn::GetAtt": ["MigrateFunction", "Arn"]}
    # Changes with every engine build, so an engine change re-runs the migrations.
    assert migration["Properties"]["EngineLayer"] == {"Ref": "EngineLayer"}


def test_database_can_be_created_as_aurora_serverless_v2(resources: dict[str, Any]) -> None:
    cluster = resources["DatabaseCluster"]
    assert cluster["Condition"] == "CreateDatabase"
    assert cluster["Properties"]["Engine"] == "aurora-postgresql"
    assert cluster["Properties"]["ManageMasterUserPassword"] is True
    assert cluster["Properties"]["StorageEncrypted"] is True
    assert "ServerlessV2ScalingConfiguration" in cluster["Properties"]
    assert props(resources, "DatabaseWriter")["DBInstanceClass"] == "db.serverless"


def test_alarms_watch_the_dlqs_and_failed_runs(resources: dict[str, Any]) -> None:
    alarms = {
        n: r["Properties"] for n, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    watched_queues = {
        a["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for a in alarms.values()
        if a["Namespace"] == "AWS/SQS"
    }
    assert watched_queues == {"ResumeDeadLetterQueue", "EventsDeadLetterQueue"}
    own = {a["MetricName"] for a in alarms.values() if a["Namespace"] == "WorkflowRunner"}
    assert own == {"RunsFailed", "DueBacklogLeft"}
    code = "".join(p.read_text() for p in (ROOT / "functions").glob("*/app.py"))
    code += (ROOT / "layers/engine/workflow_runner/aws/lambda_support.py").read_text()
    for metric in own:  # an alarm on a metric nobody emits would never fire
        assert f'"{metric}"' in code


def test_outputs(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    for name in (
        "EventBusName",
        "ResumeQueueUrl",
        "ResumeDeadLetterQueueUrl",
        "EventsDeadLetterQueueUrl",
    ):
        assert name in outputs
    for function in FUNCTIONS:
        assert outputs[f"{function}Name"]["Value"] == {"Ref": function}


# --- routing with the template's own patterns ----------------------------------------------------


def routed(name: str, template: dict[str, Any], **parameters: str) -> list[str]:
    return route(event_routes(template, parameters), load_event(name))


def test_default_routing_sends_every_event_but_the_engines_own(template: dict[str, Any]) -> None:
    both = ["TriggerProjectionFunction", "EventWakeupFunction"]
    assert routed("trigger-projection-user-signed-up.json", template) == both
    assert routed("event-wakeup-order-approved.json", template) == both
    assert routed("trigger-projection-unrouted-type.json", template) == both
    assert routed("trigger-projection-bad-own-source.json", template) == []


def test_parameters_narrow_the_rules(template: dict[str, Any]) -> None:
    narrowed = {
        "TriggerSources": "com.example.shop,com.example.accounts",
        "TriggerDetailTypePrefix": "order.",
        "AwaitedSources": "com.example.backoffice",
    }
    assert routed("trigger-projection-order-placed.json", template, **narrowed) == [
        "TriggerProjectionFunction"
    ]
    # Right source, wrong prefix; and a source the wakeup rule does not listen to.
    assert routed("trigger-projection-user-signed-up.json", template, **narrowed) == []
    assert routed("event-wakeup-order-approved.json", template, **narrowed) == [
        "EventWakeupFunction"
    ]


# --- samconfig and events -------------------------------------------------------------------------


def test_samconfig_has_default_and_prod() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    for env in ("default", "prod"):
        deploy = config[env]["deploy"]["parameters"]
        assert "CAPABILITY_IAM" in deploy["capabilities"]
        overrides = dict(item.split("=", 1) for item in deploy["parameter_overrides"])
        assert overrides["Stage"] == ("dev" if env == "default" else "prod")
        params = load_template(TEMPLATE)["Parameters"]
        assert set(overrides) <= set(params), set(overrides) - set(params)
    assert (
        config["default"]["global"]["parameters"]["stack_name"]
        != config["prod"]["global"]["parameters"]["stack_name"]
    )


def test_every_sample_event_is_used_by_a_test() -> None:
    tests = "".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    unused = [p.name for p in sorted(EVENTS.glob("*.json")) if p.name not in tests]
    assert unused == []


def test_every_function_has_sample_events() -> None:
    names = {p.name for p in EVENTS.glob("*.json")}
    for prefix in (
        "trigger-projection-",
        "event-wakeup-",
        "pending-projection-",
        "due-scan-",
        "resume-run",
        "step-dispatcher",
        "migrate-",
    ):
        assert any(n.startswith(prefix) for n in names), prefix
    assert Path(EVENTS / "resume-run.json").exists()
