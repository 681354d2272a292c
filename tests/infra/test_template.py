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
    "CallbackFunction": "functions/callback/",
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
    assert glob["Runtime"] == "python3.13" and glob["Architectures"] == ["arm64"]
    assert glob["Tracing"] == {"Ref": "TracingMode"} and glob["AutoPublishAlias"] == "live"
    assert glob["Layers"] == [
        {"Ref": "EngineLayer"},
        {"Fn::If": ["UseSamplesLayer", {"Ref": "SamplesLayer"}, {"Ref": "WorkflowLayerArn"}]},
    ]
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
    assert env["DB_PREPARED_STATEMENTS"] == {"Ref": "DatabasePreparedStatements"}
    prepared = template["Parameters"]["DatabasePreparedStatements"]
    assert (prepared["Default"], prepared["AllowedValues"]) == ("true", ["true", "false"])
    for resource in functions(template).values():
        for name in (resource["Properties"].get("Environment") or {}).get("Variables") or {}:
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), name  # no CamelCase env names


def test_layers_are_built_by_their_makefiles_for_arm64(resources: dict[str, Any]) -> None:
    for name, uri in (("EngineLayer", "layers/engine"), ("SamplesLayer", "layers/samples")):
        assert resources[name]["Type"] == "AWS::Serverless::LayerVersion"
        assert props(resources, name)["ContentUri"] == uri
        assert resources[name]["Metadata"] == {
            "BuildMethod": "makefile",
            "BuildArchitecture": "arm64",
        }
        makefile = (ROOT / uri / "Makefile").read_text()
        assert f"build-{name}:" in makefile  # the target `sam build` calls
        assert "--invalidation-mode unchecked-hash" in makefile  # bytecode shipped
    engine_requirements = (ROOT / "layers/engine/requirements.txt").read_text()
    assert "aws-lambda-powertools" in engine_requirements and "psycopg" in engine_requirements
    assert "boto3" not in engine_requirements.split("# boto3")[0]  # the runtime provides it


def test_every_parameter_is_constrained(template: dict[str, Any]) -> None:
    for name, spec in template["Parameters"].items():
        if spec["Type"] == "CommaDelimitedList":
            continue  # lists of ids or sources; validated by the Rules section
        constrained = {"AllowedValues", "AllowedPattern", "MinValue", "MaxValue"} & set(spec)
        assert constrained, f"parameter {name} has no constraint"
        assert spec.get("Description"), name


@pytest.mark.parametrize(
    ("function", "queue", "dlq", "bound"),
    [
        (
            "ResumeRunFunction",
            "ResumeQueue",
            "ResumeDeadLetterQueue",
            "ResumeRunReservedConcurrency",
        ),
        (
            "TriggerProjectionFunction",
            "TriggerQueue",
            "TriggerDeadLetterQueue",
            "TriggerProjectionConcurrency",
        ),
        ("EventWakeupFunction", "WakeupQueue", "WakeupDeadLetterQueue", "EventWakeupConcurrency"),
    ],
)
def test_queue_fed_functions_have_a_dlq_partial_failures_and_a_bound(
    resources: dict[str, Any],
    template: dict[str, Any],
    function: str,
    queue: str,
    dlq: str,
    bound: str,
) -> None:
    q = props(resources, queue)
    assert q["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]},
        "maxReceiveCount": 5,
    }
    fn = props(resources, function)
    timeout = fn.get("Timeout", template["Globals"]["Function"]["Timeout"])
    assert "Events" not in fn  # an explicit mapping: no SAM SQS event and its broad policy
    (mapping,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and r["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    ]
    assert mapping["FunctionName"] == {"Ref": f"{function}.Alias"}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # AWS: six times the function's timeout plus the mapping's batching window.
    window = mapping.get("MaximumBatchingWindowInSeconds", 0)
    if isinstance(window, dict):  # a parameter: its largest value
        window = template["Parameters"][window["Ref"]]["MaxValue"]
    assert q["VisibilityTimeout"] >= 6 * timeout + window
    # Pollers capped at the reservation: messages are never throttled into the DLQ.
    assert fn["ReservedConcurrentExecutions"] == {"Ref": bound}
    assert mapping["ScalingConfig"]["MaximumConcurrency"] == {"Ref": bound}
    if queue == "ResumeQueue":
        env = template["Globals"]["Function"]["Environment"]["Variables"]
        assert int(env["RESUME_LEASE_SECONDS"]) > 900 + q["VisibilityTimeout"]


@pytest.mark.parametrize(
    ("rule", "queue", "dlq"),
    [
        ("TriggerRule", "TriggerQueue", "TriggerDeadLetterQueue"),
        ("WakeupRule", "WakeupQueue", "WakeupDeadLetterQueue"),
    ],
)
def test_rules_deliver_to_their_intake_queue_and_dead_letter_undeliverable_events(
    resources: dict[str, Any], rule: str, queue: str, dlq: str
) -> None:
    (target,) = props(resources, rule)["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq, "Arn"]}}
    assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] == 86400


def test_schedules(resources: dict[str, Any]) -> None:
    for name in ("DueScanFunction", "PendingProjectionFunction", "StepDispatcherFunction"):
        schedules = [
            e for e in props(resources, name)["Events"].values() if e["Type"] == "Schedule"
        ]
        assert [s["Properties"]["Schedule"] for s in schedules] == ["rate(1 minute)"], name


def test_nudging_functions_know_whom_to_nudge(resources: dict[str, Any]) -> None:
    for name in ("TriggerProjectionFunction", "DueScanFunction", "ResumeRunFunction"):
        env = props(resources, name)["Environment"]["Variables"]
        assert env["PENDING_PROJECTION_FUNCTION"] == {"Ref": "PendingProjectionFunction.Alias"}
        assert env["STEP_DISPATCHER_FUNCTION"] == {"Ref": "StepDispatcherFunction.Alias"}
    dispatcher_env = props(resources, "StepDispatcherFunction")["Environment"]["Variables"]
    assert dispatcher_env["MAIL_SENDER"] == {"Ref": "MailSender"}
    assert dispatcher_env["WEBHOOK_ALLOW_HOSTS"] == {"Ref": "WebhookAllowHosts"}


def test_due_scan_waits_for_room_and_takes_the_tenant_cap(
    resources: dict[str, Any], template: dict[str, Any]
) -> None:
    env = props(resources, "DueScanFunction")["Environment"]["Variables"]
    # ResumeRun consumes while the scan runs: it keeps topping up held tenants.
    assert env["DUE_SCAN_WAIT_FOR_ROOM"] == "true"
    assert env["TENANT_MAX_IN_FLIGHT"] == {"Ref": "TenantMaxInFlight"}
    cap = template["Parameters"]["TenantMaxInFlight"]
    assert (cap["Type"], cap["Default"], cap["MinValue"]) == ("Number", 0, 0)  # off by default


def test_migration_custom_resource(resources: dict[str, Any]) -> None:
    migration = resources["SchemaMigration"]
    assert migration["Type"].startswith("Custom::")
    assert migration["Properties"]["ServiceToken"] == {"Fn::GetAtt": ["MigrateFunction", "Arn"]}
    # Changes with every engine build, so an engine change re-runs the migrations.
    assert migration["Properties"]["EngineLayer"] == {"Ref": "EngineLayer"}
    assert (
        props(resources, "MigrateFunction")["Timeout"] < migration["Properties"]["ServiceTimeout"]
    )


def test_database_can_be_created_as_aurora_serverless_v2(resources: dict[str, Any]) -> None:
    cluster = resources["DatabaseCluster"]
    assert cluster["Condition"] == "CreateDatabase"
    assert cluster["Properties"]["Engine"] == "aurora-postgresql"
    assert cluster["Properties"]["ManageMasterUserPassword"] is True
    assert cluster["Properties"]["StorageEncrypted"] is True
    assert "ServerlessV2ScalingConfiguration" in cluster["Properties"]
    assert props(resources, "DatabaseWriter")["DBInstanceClass"] == "db.serverless"


# Metrics an alarm watches that another change emits (an alarm on a metric nobody
# emits would never fire, so each entry names who will).
EMITTED_ELSEWHERE: dict[str, str] = {}


def test_alarms_watch_metrics_that_are_emitted(resources: dict[str, Any]) -> None:
    alarms = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    own = {a["MetricName"] for a in alarms if a["Namespace"] == "WorkflowRunner"}
    assert own == {
        "RunsFailed",
        "DueBacklogLeft",
        "Heartbeat",
        "ProjectionLagSeconds",
        "DeliveriesFailed",
        "TasksFailed",
    }
    engine = ROOT / "layers/engine/workflow_runner"
    code = "".join(p.read_text() for p in (ROOT / "functions").glob("*/app.py"))
    code += "".join(p.read_text() for p in (engine / "aws").glob("*.py"))
    for metric in own:
        emitted = f'"{metric}"' in code
        assert emitted or metric in EMITTED_ELSEWHERE, metric
        if emitted:
            assert metric not in EMITTED_ELSEWHERE, (
                f"{metric} is emitted now: drop it from the list"
            )


def test_outputs(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    for name in (
        "EventBusName",
        "ResumeQueueUrl",
        "ResumeDeadLetterQueueUrl",
        "TriggerQueueUrl",
        "WakeupQueueUrl",
        "TriggerDeadLetterQueueUrl",
        "WakeupDeadLetterQueueUrl",
        "AlarmTopicArn",
        "NoticeTopicArn",
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


SAMPLE_TYPES = {
    "TriggerDetailTypes": (
        "user.signed-up,order.placed,inventory.changed,data.processed,batch.submitted,"
        "parcel.ready,shipment.ready,account.updated"
    ),
    "AwaitedDetailTypes": "order.approved",
}


def test_exact_detail_types_route_each_event_to_the_one_function_that_uses_it(
    template: dict[str, Any],
) -> None:
    """With the registered types listed, a trigger event no longer also costs an
    EventWakeup invocation (and three SQS requests), nor an awaited one a trigger."""
    assert routed("trigger-projection-user-signed-up.json", template, **SAMPLE_TYPES) == [
        "TriggerProjectionFunction"
    ]
    assert routed("event-wakeup-order-approved.json", template, **SAMPLE_TYPES) == [
        "EventWakeupFunction"
    ]
    assert routed("trigger-projection-unrouted-type.json", template, **SAMPLE_TYPES) == []


@pytest.mark.parametrize("env", ["default", "prod"])
def test_samconfig_routes_every_registered_type(template: dict[str, Any], env: str) -> None:
    """What `wfr doctor` checks: the deployed rules reach the sample workflows' types."""
    import sample_workflows  # noqa: F401  (registers the samples)
    from workflow_runner.definition import WorkflowRegistry, default_registry
    from workflow_runner.local.routes import Routing, unrouted_types

    parameters = samconfig_parameters(env)
    routing = Routing(TEMPLATE, event_routes(template, parameters))
    routing.folders = {
        name: Path(str(r["Properties"]["CodeUri"])).name for name, r in functions(template).items()
    }
    # Only the samples: other tests of the same process register workflows of their own
    # (tests/cli/oncall_workflows.py) in the default registry.
    samples = WorkflowRegistry()
    for definition in default_registry().defined_in("sample_workflows"):
        samples.register(definition)
    assert len(samples.names()) >= 5
    assert unrouted_types(routing, samples) == []
    assert parameters["TriggerDetailTypes"] == SAMPLE_TYPES["TriggerDetailTypes"]


def test_rules_refuse_detail_types_and_a_prefix_together(template: dict[str, Any]) -> None:
    assert rule_failures(template, **SAMPLE_TYPES) == []
    assert rule_failures(template, **SAMPLE_TYPES, TriggerDetailTypePrefix="order.") == [
        "DetailTypesOrPrefix"
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
        for name, value in overrides.items():  # CloudFormation would refuse the deploy
            spec = params[name]
            if "AllowedValues" in spec:
                assert value in [str(v) for v in spec["AllowedValues"]], (env, name, value)
            if "MinValue" in spec:
                assert float(spec["MinValue"]) <= float(value) <= float(spec["MaxValue"]), (
                    env,
                    name,
                )
            if "AllowedPattern" in spec:
                assert re.fullmatch(spec["AllowedPattern"], value), (env, name, value)
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
        "callback-",
        "migrate-",
    ):
        assert any(n.startswith(prefix) for n in names), prefix
    assert Path(EVENTS / "resume-run.json").exists()


# --- Rules, network shapes and the connection budget ----------------------------------------


def rule_failures(template: dict[str, Any], **parameters: str) -> list[str]:
    """The Rules assertions CloudFormation would fail for these parameters."""
    from workflow_runner.aws.template import Resolver

    resolver = Resolver(template, parameters)
    failed = []
    for name, rule in template["Rules"].items():
        if "RuleCondition" in rule and not resolver.resolve(rule["RuleCondition"]):
            continue
        failed += [name for a in rule["Assertions"] if not resolver.resolve(a["Assert"])]
    return failed


EXISTING_NETWORK = {
    "VpcMode": "existing",
    "SubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "SecurityGroupId": "sg-0123456789abcdef0",
}
EXISTING_DATABASE = {
    "DatabaseMode": "existing",
    "ExistingDbEndpoint": "db.example.internal",
    "ExistingDbSecretArn": "arn:aws:secretsmanager:eu-central-1:123456789012:secret:db",
}


def test_rules_accept_the_supported_combinations(template: dict[str, Any]) -> None:
    assert rule_failures(template) == []
    assert rule_failures(template, **EXISTING_NETWORK, **EXISTING_DATABASE) == []
    assert rule_failures(template, **EXISTING_NETWORK, VpcId="vpc-0123456789abcdef0") == []


def test_rules_refuse_an_existing_database_from_a_created_vpc(template: dict[str, Any]) -> None:
    assert rule_failures(template, **EXISTING_DATABASE) == ["ExistingDatabaseNeedsItsVpc"]


def test_rules_refuse_a_created_database_in_an_existing_vpc_without_its_id(
    template: dict[str, Any],
) -> None:
    assert rule_failures(template, **EXISTING_NETWORK) == ["CreatedDatabaseInExistingVpcNeedsVpcId"]


def test_a_larger_intake_batch_needs_a_batching_window(template: dict[str, Any]) -> None:
    # Lambda refuses an SQS batch above 10 without a window; the stack should say so first.
    assert rule_failures(template, IntakeBatchSize="50") == ["LargeIntakeBatchNeedsAWindow"]
    assert rule_failures(template, IntakeBatchSize="50", IntakeBatchWindowSeconds="1") == []
    assert rule_failures(template, IntakeBatchWindowSeconds="5") == []


def test_a_larger_resume_batch_needs_a_batching_window(template: dict[str, Any]) -> None:
    assert rule_failures(template, ResumeBatchSize="50") == ["LargeResumeBatchNeedsAWindow"]
    assert rule_failures(template, ResumeBatchSize="50", ResumeBatchWindowSeconds="1") == []
    assert rule_failures(template, ResumeBatchWindowSeconds="2") == []


def test_each_batch_size_reaches_its_own_mappings(template: dict[str, Any]) -> None:
    from workflow_runner.aws.template import Resolver

    def batch_sizes(**parameters: str) -> dict[str, Any]:
        resolver = Resolver(template, parameters)
        return {
            name: resolver.resolve(template["Resources"][name]["Properties"]["BatchSize"])
            for name in ("TriggerQueueMapping", "WakeupQueueMapping", "ResumeQueueMapping")
        }

    assert batch_sizes() == {
        "TriggerQueueMapping": "10",
        "WakeupQueueMapping": "10",
        "ResumeQueueMapping": "10",
    }
    # Resumes keep their own size: a window delays every lone timer by up to its length,
    # which a deployment may take for intake bursts and not for its timers.
    assert batch_sizes(IntakeBatchSize="50", IntakeBatchWindowSeconds="1") == {
        "TriggerQueueMapping": "50",
        "WakeupQueueMapping": "50",
        "ResumeQueueMapping": "10",
    }
    assert batch_sizes(ResumeBatchSize="50", ResumeBatchWindowSeconds="1") == {
        "TriggerQueueMapping": "10",
        "WakeupQueueMapping": "10",
        "ResumeQueueMapping": "50",
    }
    windows = Resolver(template, {"ResumeBatchWindowSeconds": "2"}).resolve(
        template["Resources"]["ResumeQueueMapping"]["Properties"]["MaximumBatchingWindowInSeconds"]
    )
    assert windows == "2"


def created(template: dict[str, Any], **parameters: str) -> set[str]:
    from workflow_runner.aws.template import Resolver

    resolver = Resolver(template, parameters)
    return {
        name
        for name, r in template["Resources"].items()
        if "Condition" not in r or resolver.condition(r["Condition"])
    }


def test_nat_per_az_and_interface_endpoints_are_options(template: dict[str, Any]) -> None:
    default = created(template)
    assert {"NatGatewayA", "S3GatewayEndpoint"} <= default
    assert not {"NatGatewayB", "SqsEndpoint", "LambdaEndpoint", "SecretsManagerEndpoint"} & default
    ha = created(template, NatGateways="per-az", InterfaceEndpoints="true")
    assert {
        "NatGatewayB",
        "NatAddressB",
        "SqsEndpoint",
        "LambdaEndpoint",
        "SecretsManagerEndpoint",
    } <= ha
    route_b = template["Resources"]["PrivateDefaultRouteB"]["Properties"]["NatGatewayId"]
    assert route_b == {"Fn::If": ["NatPerAz", {"Ref": "NatGatewayB"}, {"Ref": "NatGatewayA"}]}
    existing = created(
        template, **EXISTING_NETWORK, NatGateways="per-az", InterfaceEndpoints="true"
    )
    assert not {"Vpc", "NatGatewayA", "NatGatewayB", "SqsEndpoint", "S3GatewayEndpoint"} & existing


def test_database_failover_replica_is_an_option(template: dict[str, Any]) -> None:
    assert "DatabaseReplica" not in created(template)
    assert "DatabaseReplica" in created(template, DatabaseFailoverReplica="true")
    assert "DatabaseReplica" not in created(
        template, DatabaseFailoverReplica="true", **EXISTING_NETWORK, **EXISTING_DATABASE
    )


def test_aurora_cannot_be_told_to_pause(template: dict[str, Any]) -> None:
    """Three one-minute schedules and the warm functions' connections keep the cluster
    busy, so minimum capacity 0 would only look cheaper (docs/operating/cost.md)."""
    assert template["Parameters"]["AuroraMinCapacity"]["MinValue"] == 0.5


# Connections the functions can hold, by parameter set. A Lambda execution environment
# keeps one connection; reserved concurrency caps the environments of a function. During
# a deploy the old version's idle environments keep theirs until Lambda reclaims them
# (and a canary runs both versions), so the budget counts every function twice, plus
# operators (wfr) and PostgreSQL's reserved superuser slots.
OPERATOR_CONNECTIONS = 10
RESERVED_SLOTS = 5


def connection_budget(template: dict[str, Any], parameters: dict[str, str]) -> tuple[int, int]:
    """(connections the stack can hold, max_connections of its Aurora capacity)."""
    from workflow_runner.aws.template import Resolver

    resolver = Resolver(template, parameters)
    bounds = [
        int(resolver.resolve(r["Properties"]["ReservedConcurrentExecutions"]))
        for r in functions(template).values()
    ]
    capacity = str(resolver.params["AuroraMaxCapacity"])
    max_connections = template["Mappings"]["AuroraConnections"][capacity]["Max"]
    return 2 * sum(bounds) + OPERATOR_CONNECTIONS + RESERVED_SLOTS, max_connections


def samconfig_parameters(env: str) -> dict[str, str]:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    return dict(
        item.split("=", 1) for item in config[env]["deploy"]["parameters"]["parameter_overrides"]
    )


@pytest.mark.parametrize("env", [None, "default", "prod"])
def test_the_concurrency_bounds_fit_max_connections(
    template: dict[str, Any], env: str | None
) -> None:
    for function in functions(template).values():
        assert "ReservedConcurrentExecutions" in function["Properties"]
    parameters = samconfig_parameters(env) if env else {}
    needed, available = connection_budget(template, parameters)
    assert needed <= available, (env, needed, available)


def test_the_connection_budget_check_can_fail(template: dict[str, Any]) -> None:
    needed, available = connection_budget(
        template, {"AuroraMaxCapacity": "1", "ResumeRunReservedConcurrency": "100"}
    )
    assert needed > available


def test_connection_alarm_thresholds_are_80_percent(template: dict[str, Any]) -> None:
    for capacity, row in template["Mappings"]["AuroraConnections"].items():
        assert row["Alarm"] == int(row["Max"] * 0.8), capacity
    allowed = template["Parameters"]["AuroraMaxCapacity"]["AllowedValues"]
    assert set(allowed) == set(template["Mappings"]["AuroraConnections"])


# --- the docs site describes this template ---------------------------------------------------

DOCS = ROOT / "docs"


def page(*paths: str) -> str:
    """The text of docs site pages (docs/...), joined."""
    return "\n".join((DOCS / path).read_text() for path in paths)


def test_docs_document_every_parameter(template: dict[str, Any]) -> None:
    documented = page("deploying/parameters.md")
    missing = [name for name in template["Parameters"] if f"`{name}`" not in documented]
    assert missing == []


def test_docs_document_every_alarm(template: dict[str, Any]) -> None:
    documented = page("operating/alarms.md")
    for name, resource in template["Resources"].items():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        per_function = re.fullmatch(r"(\w+?)(Errors|Throttles)Alarm", name)
        if per_function and f"`<Function>{per_function.group(2)}Alarm`" in documented:
            continue
        assert f"`{name}`" in documented, name


_RUNBOOK = re.compile(r"^### ((?:`[^`]+`(?:, )?)+) — ", re.MULTILINE)


def test_docs_have_one_runbook_per_alarm(template: dict[str, Any]) -> None:
    """Each alarm has exactly one runbook (a section headed by its name); a family
    runbook (`<Function>ErrorsAlarm`) covers the alarms of that family no other runbook
    names."""
    alarms = {n for n, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    named: list[str] = []
    for heading in _RUNBOOK.findall(page("operating/alarms.md")):
        named += re.findall(r"`([^`]+)`", heading)
    explicit = [n for n in named if not n.startswith("<Function>")]
    families = [n.removeprefix("<Function>") for n in named if n.startswith("<Function>")]
    assert sorted(explicit) == sorted(set(explicit)), "an alarm has two runbooks"
    assert set(explicit) <= alarms, "a runbook of an alarm the template does not have"
    assert len(families) == len(set(families)) and families
    for name in alarms - set(explicit):
        assert any(name.endswith(family) for family in families), f"no runbook for {name}"


def test_docs_document_every_output_queue(template: dict[str, Any]) -> None:
    documented = page(*(str(p.relative_to(DOCS)) for p in sorted(DOCS.glob("operating/*.md"))))
    for name in template["Outputs"]:
        if name.endswith("DeadLetterQueueUrl") or name.endswith("TopicArn"):
            assert f"`{name}`" in documented or name.replace("Arn", "") in documented, name
