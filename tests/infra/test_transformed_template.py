"""What CloudFormation actually receives after SAM's transform: least-privilege IAM,
bounded concurrency, alarms, the migration's ordering, gradual deployments."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

Transformed = dict[str, Any]

FUNCTIONS = [
    "TriggerProjectionFunction",
    "EventWakeupFunction",
    "PendingProjectionFunction",
    "DueScanFunction",
    "ResumeRunFunction",
    "StepDispatcherFunction",
    "CallbackFunction",
    "MigrateFunction",
]
DATABASE_FUNCTIONS = [f for f in FUNCTIONS if f != "MigrateFunction"]
SCHEDULED = {
    "DueScanFunction": "DueScan",
    "PendingProjectionFunction": "PendingProjection",
    "StepDispatcherFunction": "StepDispatcher",
}
# Actions without resource-level permissions: the only ones allowed on "*".
UNSCOPABLE = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "cloudwatch:DescribeAlarms",
}
SQS_POLLING = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
}


@pytest.fixture(scope="module")
def cfn(transform: Callable[..., Transformed]) -> Transformed:
    return transform()


@pytest.fixture(scope="module")
def resources(cfn: Transformed) -> dict[str, Any]:
    return cfn["Resources"]


def of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {n: r for n, r in resources.items() if r["Type"] == kind}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statements(resources: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(owner, statement) of every identity policy: roles' inline policies, managed and
    standalone policies."""
    for name, r in resources.items():
        props = r.get("Properties", {})
        if r["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                for s in policy["PolicyDocument"]["Statement"]:
                    yield name, s
        elif r["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
            for s in props["PolicyDocument"]["Statement"]:
                yield name, s


def role_of(resources: dict[str, Any], function: str) -> dict[str, Any]:
    role = resources[function]["Properties"]["Role"]
    assert role == {"Fn::GetAtt": [role["Fn::GetAtt"][0], "Arn"]}
    return dict(resources[role["Fn::GetAtt"][0]])


def role_statements(resources: dict[str, Any], function: str) -> list[dict[str, Any]]:
    """Every statement a function's role carries: inline, managed, and standalone
    policies attached to it."""
    role = role_of(resources, function)
    name = resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    found = [
        s for p in role["Properties"].get("Policies", []) for s in p["PolicyDocument"]["Statement"]
    ]
    for arn in role["Properties"].get("ManagedPolicyArns", []):
        found += resources[arn["Ref"]]["Properties"]["PolicyDocument"]["Statement"]
    for policy in of_type(resources, "AWS::IAM::Policy").values():
        if {"Ref": name} in policy["Properties"]["Roles"]:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def own_versions(function: str) -> dict[str, str]:
    """Every version (and alias) of one of our functions: `${Function.Arn}:*`."""
    return {"Fn::Sub": f"${{{function}.Arn}}:*"}


def alias(function: str) -> dict[str, str]:
    return {"Ref": f"{function}Aliaslive"}


# --- IAM -------------------------------------------------------------------------------------


def test_no_aws_managed_policy_is_attached_anywhere(resources: dict[str, Any]) -> None:
    """SAM's generated roles would carry AWSLambdaBasicExecutionRole (logs everywhere),
    AWSLambdaSQSQueueExecutionRole (every queue) or AWSCodeDeployRoleForLambda."""
    for name, role in of_type(resources, "AWS::IAM::Role").items():
        for arn in role["Properties"].get("ManagedPolicyArns", []):
            assert set(arn) == {"Ref"}, (name, arn)
            assert resources[arn["Ref"]]["Type"] == "AWS::IAM::ManagedPolicy", (name, arn)


def test_wildcards_only_where_iam_has_no_resource_level_permissions(
    resources: dict[str, Any],
) -> None:
    own_qualifier = re.compile(r"^\$\{\w+Function\.Arn\}:\*$")
    for owner, statement in statements(resources):
        actions = as_list(statement["Action"])
        assert all("*" not in a for a in actions), (owner, actions)
        assert statement["Effect"] == "Allow"
        for resource in as_list(statement["Resource"]):
            text = resource if isinstance(resource, str) else str(resource.get("Fn::Sub", ""))
            if resource == "*":
                assert set(actions) <= UNSCOPABLE, (owner, actions)
            elif "*" in text:
                if own_qualifier.match(text):
                    continue  # versions and aliases of one of our functions
                # SES identities are scoped by the sender condition instead.
                assert set(actions) <= {"ses:SendEmail", "ses:SendRawEmail"}, (owner, text)
                assert statement["Condition"]["StringEquals"]["ses:FromAddress"], owner


def test_each_function_has_its_own_role(resources: dict[str, Any]) -> None:
    roles = [resources[f]["Properties"]["Role"]["Fn::GetAtt"][0] for f in FUNCTIONS]
    assert len(set(roles)) == len(FUNCTIONS)
    for role in roles:
        (statement,) = resources[role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}


def test_logs_only_to_the_functions_own_log_group(resources: dict[str, Any]) -> None:
    for function in FUNCTIONS:
        group = resources[function]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert resources[group]["Type"] == "AWS::Logs::LogGroup"
        logs = [
            s
            for s in role_statements(resources, function)
            if any(a.startswith("logs:") for a in as_list(s["Action"]))
        ]
        assert logs, function
        for s in logs:
            assert s["Resource"] == {"Fn::GetAtt": [group, "Arn"]}, function
            assert "logs:CreateLogGroup" not in as_list(s["Action"])


def polled_queues(resources: dict[str, Any]) -> dict[str, str]:
    """function -> the queue its event source mapping polls."""
    found = {}
    for mapping in of_type(resources, "AWS::Lambda::EventSourceMapping").values():
        props = mapping["Properties"]
        function = props["FunctionName"]["Ref"].removesuffix("Aliaslive")
        found[function] = props["EventSourceArn"]["Fn::GetAtt"][0]
    return found


def test_sqs_permissions_name_exact_queues(resources: dict[str, Any]) -> None:
    polled = polled_queues(resources)
    assert polled == {
        "TriggerProjectionFunction": "TriggerQueue",
        "EventWakeupFunction": "WakeupQueue",
        "ResumeRunFunction": "ResumeQueue",
    }
    for function in FUNCTIONS:
        for s in role_statements(resources, function):
            actions = set(as_list(s["Action"]))
            if actions & SQS_POLLING:
                assert s["Resource"] == {"Fn::GetAtt": [polled[function], "Arn"]}, function
            if "sqs:SendMessage" in actions:
                assert s["Resource"] == {"Fn::GetAtt": ["ResumeQueue", "Arn"]}, function


def test_invoke_permissions_name_exact_aliases(resources: dict[str, Any]) -> None:
    """Nudges go to exact aliases; ResumeRun and StepDispatcher may also invoke their own
    kept versions (a run whose definition only an older version has), nothing else's."""
    nudged = [alias("PendingProjectionFunction"), alias("StepDispatcherFunction")]
    invokers = set()
    for function in FUNCTIONS:
        for s in role_statements(resources, function):
            if "lambda:InvokeFunction" in as_list(s["Action"]):
                allowed = [*nudged, own_versions(function)]
                assert all(r in allowed for r in as_list(s["Resource"])), function
                invokers.add(function)
    assert invokers == {
        "TriggerProjectionFunction",
        "EventWakeupFunction",
        "DueScanFunction",
        "ResumeRunFunction",
        "StepDispatcherFunction",
    }
    # And the functions nudge exactly those aliases.
    for function in ("TriggerProjectionFunction", "DueScanFunction", "ResumeRunFunction"):
        env = resources[function]["Properties"]["Environment"]["Variables"]
        assert env["PENDING_PROJECTION_FUNCTION"] == alias("PendingProjectionFunction")
        assert env["STEP_DISPATCHER_FUNCTION"] == alias("StepDispatcherFunction")


def test_only_the_functions_that_run_user_code_invoke_their_kept_versions(
    resources: dict[str, Any],
) -> None:
    keepers = {}
    for function in FUNCTIONS:
        for s in role_statements(resources, function):
            if own_versions(function) in as_list(s["Resource"]):
                assert as_list(s["Action"]) == ["lambda:InvokeFunction"], function
                keepers[function] = s
    assert set(keepers) == {"ResumeRunFunction", "StepDispatcherFunction"}
    for function in FUNCTIONS:  # the stack itself never deletes a function or version
        for s in role_statements(resources, function):
            assert "lambda:DeleteFunction" not in as_list(s["Action"]), function


def test_a_deploy_keeps_the_versions_runs_may_be_handed_to(resources: dict[str, Any]) -> None:
    """The premise of kept code: a deploy publishes a version of each function and leaves
    the previous ones in place (only `wfr versions prune` deletes them)."""
    for function in ("ResumeRunFunction", "StepDispatcherFunction"):
        published = [
            r
            for r in of_type(resources, "AWS::Lambda::Version").values()
            if r["Properties"]["FunctionName"] == {"Ref": function}
        ]
        assert len(published) == 1, function
        assert published[0]["DeletionPolicy"] == "Retain", function
        live = resources[f"{function}Aliaslive"]["Properties"]
        assert live["FunctionVersion"]["Fn::GetAtt"][1] == "Version"


def versions_published(resources: dict[str, Any]) -> dict[str, str]:
    """function -> the logical ID of the version this deploy publishes of it (SAM names
    it by a hash of what it covers: a new ID is a new version)."""
    found = {}
    for name, r in of_type(resources, "AWS::Lambda::Version").items():
        found[r["Properties"]["FunctionName"]["Ref"]] = name
    return found


def test_a_deploy_of_the_engine_layer_alone_publishes_a_version_of_every_function(
    resources: dict[str, Any], transform_edited: Callable[[str, str], Transformed]
) -> None:
    """The engine is a layer. Plain AutoPublishAlias hashes only a function's own code,
    environment and memory into its version: a deploy that changed only the layer would
    publish nothing, and `live` would go on serving the old code (and no version would
    be kept for runs of the definitions it replaced). (The workflows layer: below.)"""
    before = versions_published(resources)
    assert set(before) == set(FUNCTIONS)
    edited = transform_edited("ContentUri: layers/engine\n", "ContentUri: layers/engine-edited\n")
    after = versions_published(edited["Resources"])
    assert all(after[f] != before[f] for f in FUNCTIONS)
    for function in FUNCTIONS:  # the alias moves to the new version; the old stays
        version = edited["Resources"][after[function]]
        assert version["DeletionPolicy"] == "Retain", function
        live = edited["Resources"][f"{function}Aliaslive"]["Properties"]
        assert live["FunctionVersion"] == {"Fn::GetAtt": [after[function], "Version"]}
    # So does a change of a function's properties (a timeout here).
    longer = transform_edited(
        "Description: Resumes suspended runs (SQS resume queue batches or a direct invoke)\n",
        "Description: Resumes suspended runs (SQS resume queue batches or a direct invoke)\n"
        "      Timeout: 29\n",
    )
    assert (
        versions_published(longer["Resources"])["ResumeRunFunction"] != before["ResumeRunFunction"]
    )
    # A deploy that changes nothing the functions run publishes no version.
    unchanged = transform_edited(
        "Description: wfr versions prune - delete", "Description: wfr versions prune deletes"
    )
    assert versions_published(unchanged["Resources"]) == before


# --- what a deploy publishes -------------------------------------------------------------
#
# CloudFormation publishes a new Lambda version when the template's version resource is
# new (SAM names it by a hash of what it covers) or when the resource is *replaced*: a
# property whose change requires replacement resolves to another value with this
# deploy's parameters. The plan below compares two deploys the way CloudFormation
# does, with the replacement rules from the resource provider schemas.

_NO_VALUE = object()


class _Deploy:
    """A transformed template with the parameter values it is deployed with (the
    transform script makes them the Parameters' defaults)."""

    def __init__(self, cfn: Transformed) -> None:
        self.cfn = cfn
        self.resources: dict[str, Any] = cfn["Resources"]
        self.parameters: dict[str, Any] = {
            "AWS::Region": "eu-central-1",
            "AWS::AccountId": "123456789012",
            "AWS::Partition": "aws",
            "AWS::StackName": "workflow-runner",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": _NO_VALUE,
        }
        for name, spec in cfn.get("Parameters", {}).items():
            value = spec.get("Default", "")
            if spec["Type"] == "CommaDelimitedList" or spec["Type"].startswith("List<"):
                value = [v.strip() for v in value.split(",")] if value else []
            self.parameters[name] = value

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.cfn["Conditions"][name]))

    def resolve(self, value: Any) -> Any:
        """The value CloudFormation computes. A resource reads as `<LogicalId>` (a new
        logical ID is a new resource, hence another physical ID or attribute)."""
        if isinstance(value, list):
            return [v for v in (self.resolve(v) for v in value) if v is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            [(function, arg)] = value.items()
            if function == "Ref":
                return self.parameters.get(arg, f"<{arg}>")
            if function == "Fn::GetAtt":
                return f"<{arg if isinstance(arg, str) else '.'.join(arg)}>"
            if function == "Condition":
                return self.condition(arg)
            if function == "Fn::If":
                name, yes, no = arg
                return self.resolve(yes if self.condition(name) else no)
            if function == "Fn::Equals":
                left, right = self.resolve(arg)
                return left == right
            if function == "Fn::Not":
                return not self.resolve(arg[0])
            if function in ("Fn::And", "Fn::Or"):
                values = [bool(v) for v in self.resolve(arg)]
                return all(values) if function == "Fn::And" else any(values)
            if function == "Fn::Join":
                separator, items = arg
                items = self.resolve(items)
                if all(isinstance(i, str) for i in items):
                    return separator.join(items)
            if function == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                variables = self.resolve(variables)

                def substitute(match: re.Match[str]) -> str:
                    name = match.group(1)
                    if name in variables:
                        return str(variables[name])
                    if name in self.parameters:
                        return str(self.parameters[name])
                    return f"<{name}>"

                return re.sub(r"\$\{([^!}][^}]*)\}", substitute, text)
            # Anything else: its own shape with resolved arguments (equal inputs, equal
            # result), which is all the comparison needs.
            return {function: self.resolve(arg)}
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not _NO_VALUE}


def deploy_plan(
    before: Transformed,
    after: Transformed,
    create_only_properties: Callable[[set[str]], dict[str, set[str]]],
) -> dict[str, str]:
    """Logical ID -> "create", "replace" or "delete" for the resources a deploy from
    `before` to `after` creates, replaces or removes (updates in place are left out)."""
    old, new = _Deploy(before), _Deploy(after)

    def exists(deploy: _Deploy, name: str) -> bool:
        condition = deploy.resources[name].get("Condition")
        return condition is None or deploy.condition(condition)

    old_names = {n for n in old.resources if exists(old, n)}
    new_names = {n for n in new.resources if exists(new, n)}
    replacing = create_only_properties({new.resources[n]["Type"] for n in old_names & new_names})
    plan = {n: "create" for n in new_names - old_names}
    plan.update({n: "delete" for n in old_names - new_names})
    for name in old_names & new_names:
        was, now = old.resources[name], new.resources[name]
        if was["Type"] != now["Type"]:
            plan[name] = "replace"
            continue
        for prop in replacing[now["Type"]]:
            if old.resolve(was.get("Properties", {}).get(prop)) != new.resolve(
                now.get("Properties", {}).get(prop)
            ):
                plan[name] = "replace"
    return plan


def published_versions(
    before: Transformed,
    after: Transformed,
    create_only_properties: Callable[[set[str]], dict[str, set[str]]],
) -> set[str]:
    """The functions a deploy from `before` to `after` publishes a new version of; every
    version it leaves behind stays (asserted here, for each such deploy)."""
    plan = deploy_plan(before, after, create_only_properties)
    published = set()
    for name, action in plan.items():
        if action in ("create", "replace") and after["Resources"][name]["Type"] == (
            "AWS::Lambda::Version"
        ):
            published.add(after["Resources"][name]["Properties"]["FunctionName"]["Ref"])
        if action in ("delete", "replace") and before["Resources"][name]["Type"] == (
            "AWS::Lambda::Version"
        ):
            policy = "DeletionPolicy" if action == "delete" else "UpdateReplacePolicy"
            assert before["Resources"][name].get(policy) == "Retain", (name, action)
    # The only resources such a deploy replaces are versions: the UpdateReplacePolicy the
    # functions pass on to what SAM generates for them never leaves anything else behind.
    for name, action in plan.items():
        if action == "replace":
            assert after["Resources"][name]["Type"] == "AWS::Lambda::Version", name
    # Lambda publishes only what differs from the function's latest version: a version
    # resource created or replaced over an unchanged function fails the deploy ("A
    # version for this Lambda function exists").
    old, new = _Deploy(before), _Deploy(after)
    for function in published:
        assert old.resolve(before["Resources"][function]["Properties"]) != new.resolve(
            after["Resources"][function]["Properties"]
        ), function
    for function in published:  # and the live alias moves to the version published
        live = after["Resources"][f"{function}Aliaslive"]["Properties"]["FunctionVersion"]
        assert live["Fn::GetAtt"][1] == "Version"
        version = after["Resources"][live["Fn::GetAtt"][0]]
        assert version["Properties"]["FunctionName"] == {"Ref": function}
    return published


WORKFLOWS_V1 = "arn:aws:lambda:eu-central-1:123456789012:layer:shop-dev-workflows:1"
WORKFLOWS_V2 = "arn:aws:lambda:eu-central-1:123456789012:layer:shop-dev-workflows:2"


def test_a_deploy_of_another_workflows_layer_publishes_a_version_of_every_function(
    transform: Callable[..., Transformed],
    create_only_properties: Callable[[set[str]], dict[str, set[str]]],
) -> None:
    """A project's deploy (`wfr init`'s nested application, or WorkflowLayerArn given to
    `sam deploy`) that changes nothing but its workflows: SAM's version hash sees
    neither the Fn::If that picks the layer nor the parameter's value, so the version
    resources keep their logical IDs. Their Description is the workflows layer's ARN,
    and a version's Description can only be replaced: every function gets a new version
    with the new workflows, `live` moves to it, and the previous one stays."""
    v1 = transform(WorkflowLayerArn=WORKFLOWS_V1)
    v2 = transform(WorkflowLayerArn=WORKFLOWS_V2)
    assert published_versions(v1, v2, create_only_properties) == set(FUNCTIONS)
    for function, name in versions_published(v2["Resources"]).items():
        version = v2["Resources"][name]
        assert _Deploy(v2).resolve(version["Properties"]["Description"]) == WORKFLOWS_V2
        assert version["UpdateReplacePolicy"] == "Retain", function
    # The same layer again (a deploy that changes something else, or nothing):
    # no version.
    again = transform(WorkflowLayerArn=WORKFLOWS_V2)
    assert published_versions(v2, again, create_only_properties) == set()
    # From the samples layer to a project's own, and back.
    samples = transform()
    assert published_versions(samples, v1, create_only_properties) == set(FUNCTIONS)
    assert published_versions(v1, samples, create_only_properties) == set(FUNCTIONS)


def test_a_deploy_of_the_samples_layer_alone_publishes_a_version_of_every_function(
    cfn: Transformed,
    transform_edited: Callable[[str, str], Transformed],
    create_only_properties: Callable[[set[str]], dict[str, set[str]]],
) -> None:
    """This repository's own deploy (`sam deploy`, samconfig.toml): a new samples layer
    version (its content changed) reaches every function's `live` alias."""
    edited = transform_edited("ContentUri: layers/samples\n", "ContentUri: layers/samples-edited\n")
    assert published_versions(cfn, edited, create_only_properties) == set(FUNCTIONS)
    assert published_versions(cfn, cfn, create_only_properties) == set()


def test_code_and_engine_deploys_still_publish_only_what_they_change(
    cfn: Transformed,
    transform_edited: Callable[[str, str], Transformed],
    create_only_properties: Callable[[set[str]], dict[str, set[str]]],
) -> None:
    """The workflows rule adds to SAM's hash; it does not replace it."""
    resume_run = transform_edited(
        "CodeUri: functions/resume_run/\n", "CodeUri: functions/resume_run_edited/\n"
    )
    assert published_versions(cfn, resume_run, create_only_properties) == {"ResumeRunFunction"}
    engine = transform_edited("ContentUri: layers/engine\n", "ContentUri: layers/engine-edited\n")
    assert published_versions(cfn, engine, create_only_properties) == set(FUNCTIONS)


def test_the_first_deploy_of_the_workflows_rule_publishes_new_versions_the_usual_way(
    cfn: Transformed,
    transform_rewritten: Callable[[Callable[[str], str]], Transformed],
    create_only_properties: Callable[[set[str]], dict[str, set[str]]],
) -> None:
    """Onto a stack deployed before the rule (no VersionDescription, no
    UpdateReplacePolicy, no WORKFLOWS_LAYER): a version resource replaced only for its new
    Description would publish nothing (the function unchanged) and fail the deploy, and
    the version it replaced would be deleted under the old template's policy. The new
    variable is in SAM's hash, so the deploy creates new version resources instead, and
    the old ones stay by SAM's DeletionPolicy."""

    def before_the_rule(text: str) -> str:
        kept = [
            line
            for line in text.splitlines(keepends=True)
            if not line.lstrip().startswith(
                ("VersionDescription:", "UpdateReplacePolicy: Retain  #", "WORKFLOWS_LAYER:")
            )
        ]
        return "".join(kept)

    older = transform_rewritten(before_the_rule)
    older_versions = of_type(older["Resources"], "AWS::Lambda::Version").values()
    assert not any("UpdateReplacePolicy" in r for r in older_versions)
    plan = deploy_plan(older, cfn, create_only_properties)
    for function, name in versions_published(cfn["Resources"]).items():
        assert plan.get(name) == "create", function
    assert published_versions(older, cfn, create_only_properties) == set(FUNCTIONS)


def test_the_pruning_policy_deletes_versions_of_the_keepers_only(
    cfn: Transformed, resources: dict[str, Any]
) -> None:
    policy = resources["VersionPruningPolicy"]
    assert policy["Type"] == "AWS::IAM::ManagedPolicy"
    assert not {"Roles", "Users", "Groups"} & set(policy["Properties"])  # attached by you
    read, delete = policy["Properties"]["PolicyDocument"]["Statement"]
    keepers = ("ResumeRunFunction", "StepDispatcherFunction")
    assert set(read["Action"]) == {"lambda:ListVersionsByFunction", "lambda:GetAlias"}
    assert read["Resource"] == [
        r for f in keepers for r in ({"Fn::GetAtt": [f, "Arn"]}, own_versions(f))
    ]
    # Versions only: DeleteFunction on an unqualified ARN would delete the function.
    assert (delete["Action"], delete["Resource"]) == (
        "lambda:DeleteFunction",
        [own_versions(f) for f in keepers],
    )
    assert cfn["Outputs"]["VersionPruningPolicyArn"]["Value"] == {"Ref": "VersionPruningPolicy"}


def test_resource_policies_admit_only_their_own_rules(resources: dict[str, Any]) -> None:
    for name, permission in of_type(resources, "AWS::Lambda::Permission").items():
        props = permission["Properties"]
        if name.startswith("CallbackEndpoint"):
            continue  # the public callback endpoint: its own test below
        assert props["Principal"] == "events.amazonaws.com", name
        rule = props["SourceArn"]["Fn::GetAtt"][0]
        assert resources[rule]["Type"] == "AWS::Events::Rule", name
        assert props["FunctionName"]["Ref"].endswith("Aliaslive"), name
    for name, policy in of_type(resources, "AWS::SQS::QueuePolicy").items():
        for s in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert s["Principal"] == {"Service": "events.amazonaws.com"}, name
            assert s["Action"] == "sqs:SendMessage", name
            (source,) = s["Condition"]["ArnEquals"]["aws:SourceArn"]["Fn::GetAtt"][:1]
            assert resources[source]["Type"] == "AWS::Events::Rule", name
            targets = {
                t["Arn"]["Fn::GetAtt"][0] for t in resources[source]["Properties"]["Targets"]
            }
            dlqs = {
                t["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
                for t in resources[source]["Properties"]["Targets"]
            }
            queues = {r["Fn::GetAtt"][0] for r in as_list(s["Resource"])}
            assert queues == targets | dlqs, name


# Functions whose passes hand out callback tokens: they run first passes (TriggerProjection,
# DueScan's cron runs, StepDispatcher's child runs) or resumed ones (ResumeRun).
PASS_FUNCTIONS = {
    "TriggerProjectionFunction",
    "DueScanFunction",
    "ResumeRunFunction",
    "StepDispatcherFunction",
}


def test_only_the_callback_endpoint_is_public_and_only_through_its_url(
    resources: dict[str, Any],
) -> None:
    """AuthType NONE (the token is the credential) on the live alias of CallbackFunction;
    the two public permissions (InvokeFunctionUrl, and InvokeFunction only when invoked
    through the URL) name that alias and nothing else."""
    (url,) = of_type(resources, "AWS::Lambda::Url").values()
    assert url["Properties"]["AuthType"] == "NONE"
    assert url["Properties"]["TargetFunctionArn"] == {"Ref": "CallbackFunctionAliaslive"}
    public = {
        name: p["Properties"]
        for name, p in of_type(resources, "AWS::Lambda::Permission").items()
        if p["Properties"]["Principal"] == "*"
    }
    assert {p["Action"] for p in public.values()} == {
        "lambda:InvokeFunctionUrl",
        "lambda:InvokeFunction",
    }
    for name, props in public.items():
        assert props["FunctionName"] == {"Ref": "CallbackFunctionAliaslive"}, name
        if props["Action"] == "lambda:InvokeFunctionUrl":
            assert props["FunctionUrlAuthType"] == "NONE", name
        else:
            assert props["InvokedViaFunctionUrl"] is True, name
    assert resources["CallbackFunction"]["Properties"]["Timeout"] <= 30


def test_the_callback_endpoint_only_records_and_enqueues(resources: dict[str, Any]) -> None:
    """Its role: its log group, the database secret and network (the base policy), and
    sending to the resume queue. No nudges, no mail, no queue polling."""
    own = [
        s
        for p in role_of(resources, "CallbackFunction")["Properties"]["Policies"]
        for s in p["PolicyDocument"]["Statement"]
    ]
    assert {a for s in own for a in as_list(s["Action"])} == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "sqs:SendMessage",
    }


def test_functions_that_run_passes_link_callbacks_to_the_endpoint(
    resources: dict[str, Any],
) -> None:
    url = {"Fn::GetAtt": ["CallbackEndpointUrl", "FunctionUrl"]}
    for function in FUNCTIONS:
        env = resources[function]["Properties"].get("Environment", {}).get("Variables", {})
        if function in PASS_FUNCTIONS:
            assert env["CALLBACK_BASE_URL"] == url, function
        else:
            assert "CALLBACK_BASE_URL" not in env, function


def test_the_deployment_role_shifts_only_our_aliases(
    transform: Callable[..., Transformed],
) -> None:
    resources = transform(DeploymentType="Canary10Percent5Minutes")["Resources"]
    groups = of_type(resources, "AWS::CodeDeploy::DeploymentGroup")
    assert {g["Properties"]["ServiceRoleArn"]["Fn::GetAtt"][0] for g in groups.values()} == {
        "DeploymentRole"
    }
    assert "CodeDeployServiceRole" not in resources


# --- concurrency and queues ---------------------------------------------------------------------


def test_every_function_has_a_concurrency_bound(resources: dict[str, Any]) -> None:
    for name, function in of_type(resources, "AWS::Lambda::Function").items():
        assert "ReservedConcurrentExecutions" in function["Properties"], name


def test_pollers_stay_within_the_reservation_and_report_partial_failures(
    resources: dict[str, Any],
) -> None:
    for name, mapping in of_type(resources, "AWS::Lambda::EventSourceMapping").items():
        props = mapping["Properties"]
        function = props["FunctionName"]["Ref"].removesuffix("Aliaslive")
        fn = resources[function]["Properties"]
        assert props["ScalingConfig"]["MaximumConcurrency"] == fn["ReservedConcurrentExecutions"], (
            name
        )
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"], name
        queue = resources[props["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        assert queue["VisibilityTimeout"] >= 6 * fn.get("Timeout", 30), name
        assert queue["RedrivePolicy"]["maxReceiveCount"] >= 3, name


def test_rules_deliver_to_intake_queues_with_a_dead_letter_queue(resources: dict[str, Any]) -> None:
    routed = {}
    for name, rule in of_type(resources, "AWS::Events::Rule").items():
        props = rule["Properties"]
        if "EventPattern" not in props:
            continue
        (target,) = props["Targets"]
        queue = target["Arn"]["Fn::GetAtt"][0]
        assert resources[queue]["Type"] == "AWS::SQS::Queue", name
        dlq = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
        assert resources[queue]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == {
            "Fn::GetAtt": [dlq, "Arn"]
        }
        routed[name] = queue
    assert routed == {"TriggerRule": "TriggerQueue", "WakeupRule": "WakeupQueue"}


# --- functions ---------------------------------------------------------------------------------


def test_functions_run_python313_on_arm64_with_json_logs(resources: dict[str, Any]) -> None:
    for name in FUNCTIONS:
        props = resources[name]["Properties"]
        assert props["Runtime"] == "python3.13" and props["Architectures"] == ["arm64"], name
        assert props["LoggingConfig"]["LogFormat"] == "JSON", name
        assert props["TracingConfig"] == {"Mode": {"Ref": "TracingMode"}}, name
    for layer in of_type(resources, "AWS::Lambda::LayerVersion").values():
        assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    for group in of_type(resources, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_every_function_takes_the_workflows_from_the_samples_or_the_given_layer(
    resources: dict[str, Any], cfn: Transformed
) -> None:
    """WorkflowLayerArn empty: the samples layer this template builds; set (a project
    nesting the application, see `wfr init`): that layer, and no samples layer at all."""
    layers = of_type(resources, "AWS::Lambda::LayerVersion")
    [engine] = [n for n in layers if n.startswith("EngineLayer")]
    [samples] = [n for n in layers if n.startswith("SamplesLayer")]
    assert "Condition" not in layers[engine]
    assert layers[samples]["Condition"] == "UseSamplesLayer"
    assert cfn["Conditions"]["UseSamplesLayer"] == {"Fn::Equals": [{"Ref": "WorkflowLayerArn"}, ""]}
    for name in FUNCTIONS:
        assert resources[name]["Properties"]["Layers"] == [
            {"Ref": engine},
            {"Fn::If": ["UseSamplesLayer", {"Ref": samples}, {"Ref": "WorkflowLayerArn"}]},
        ], name
    pattern = re.compile(cfn["Parameters"]["WorkflowLayerArn"]["AllowedPattern"])
    assert pattern.fullmatch("") and pattern.fullmatch(
        "arn:aws:lambda:eu-central-1:123456789012:layer:shop-dev-workflows:3"
    )
    assert not pattern.fullmatch("arn:aws:lambda:eu-central-1:123456789012:function:f")


def test_database_functions_wait_for_the_migration(resources: dict[str, Any]) -> None:
    for name in DATABASE_FUNCTIONS:
        assert "SchemaMigration" in as_list(resources[name].get("DependsOn", [])), name


def test_the_migration_answers_in_time_and_outlives_its_route(resources: dict[str, Any]) -> None:
    migration = resources["SchemaMigration"]
    timeout = resources["MigrateFunction"]["Properties"]["Timeout"]
    assert timeout < migration["Properties"]["ServiceTimeout"] < 3600
    assert {"DatabaseReady", "NetworkReady"} <= set(as_list(migration["DependsOn"]))
    referenced = {
        branch[1]["Ref"]
        for branch in (r["Fn::If"] for r in resources["NetworkReady"]["Metadata"]["Routes"])
    }
    assert referenced == {
        "PrivateDefaultRouteA",
        "PrivateDefaultRouteB",
        "PrivateSubnetARoutes",
        "PrivateSubnetBRoutes",
        "S3GatewayEndpoint",
    }
    endpoint = resources["S3GatewayEndpoint"]["Properties"]
    assert endpoint["VpcEndpointType"] == "Gateway"
    assert endpoint["RouteTableIds"] == [
        {"Ref": "PrivateRouteTableA"},
        {"Ref": "PrivateRouteTableB"},
    ]


# --- alarms ------------------------------------------------------------------------------------


def alarms(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: r["Properties"] for n, r in of_type(resources, "AWS::CloudWatch::Alarm").items()}


def watched(resources: dict[str, Any], namespace: str, metric: str) -> dict[str, dict[str, Any]]:
    """Dimension value (resource name or literal) -> alarm, for one metric."""
    found = {}
    for alarm in alarms(resources).values():
        if (alarm["Namespace"], alarm["MetricName"]) == (namespace, metric):
            # The dimension that tells alarms of one metric apart (not service or Role).
            naming = [d for d in alarm["Dimensions"] if d["Name"] not in ("service", "Role")]
            value = (naming or alarm["Dimensions"])[0]["Value"]
            key = (
                value.get("Ref") or value.get("Fn::GetAtt", [None])[0]
                if isinstance(value, dict)
                else value
            )
            found[str(key)] = alarm
    return found


def test_every_function_has_errors_and_throttles_alarms(resources: dict[str, Any]) -> None:
    assert set(watched(resources, "AWS/Lambda", "Errors")) == set(FUNCTIONS)
    assert set(watched(resources, "AWS/Lambda", "Throttles")) == set(FUNCTIONS)


def test_scheduled_functions_beat_and_silence_breaches(resources: dict[str, Any]) -> None:
    beats = watched(resources, "WorkflowRunner", "Heartbeat")
    assert set(beats) == set(SCHEDULED.values())
    for alarm in beats.values():
        assert alarm["TreatMissingData"] == "breaching"
        assert alarm["ComparisonOperator"] == "LessThanThreshold" and alarm["Threshold"] == 1
        assert {"Name": "service", "Value": "workflow-runner"} in alarm["Dimensions"]


def test_every_dead_letter_queue_and_every_queue_age_is_watched(resources: dict[str, Any]) -> None:
    queues = of_type(resources, "AWS::SQS::Queue")
    dlqs = {
        q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        for q in queues.values()
        if "RedrivePolicy" in q["Properties"]
    }
    assert set(watched(resources, "AWS/SQS", "ApproximateNumberOfMessagesVisible")) == dlqs
    assert set(watched(resources, "AWS/SQS", "ApproximateAgeOfOldestMessage")) == set(queues) - dlqs


def test_engine_and_database_health_alarms(resources: dict[str, Any]) -> None:
    assert set(watched(resources, "WorkflowRunner", "ProjectionLagSeconds")) == {"workflow-runner"}
    assert set(watched(resources, "WorkflowRunner", "DueBacklogLeft")) == {"workflow-runner"}
    for metric in ("ACUUtilization", "DatabaseConnections"):
        (alarm,) = watched(resources, "AWS/RDS", metric).values()
        assert alarm["Dimensions"] == [
            {"Name": "DBClusterIdentifier", "Value": {"Ref": "DatabaseCluster"}},
            {"Name": "Role", "Value": "WRITER"},
        ]
    connections = alarms(resources)["DatabaseConnectionsAlarm"]
    assert connections["Threshold"] == {
        "Fn::FindInMap": ["AuroraConnections", {"Ref": "AuroraMaxCapacity"}, "Alarm"]
    }


def test_paging_alarms_and_notices_go_to_separate_topics(resources: dict[str, Any]) -> None:
    notices = {
        "FailedRunsAlarm",
        "PendingProjectionThrottlesAlarm",
        "DueScanThrottlesAlarm",
        "StepDispatcherThrottlesAlarm",
        "DeliveriesFailedAlarm",
        "TasksFailedAlarm",
        "CallbackThrottlesAlarm",
    }
    for name, alarm in alarms(resources).items():
        expected = {"Ref": "NoticeTopic"} if name in notices else {"Ref": "AlarmTopic"}
        assert alarm["AlarmActions"] == [expected], name
    # A run that ends failed by design (an approval timing out) never pages.
    assert alarms(resources)["FailedRunsAlarm"]["MetricName"] == "RunsFailed"


def test_a_projection_that_falls_behind_pages(resources: dict[str, Any]) -> None:
    """Timers and wakeups wait for the pending projection while it is behind (issue 11,
    item 2): the lag PendingProjection emits after each catch-up pages when it stays over
    5 minutes for 5 minutes, and pages again when it recovers. No data is not a breach: a
    projection that stops running is the heartbeat alarm's business."""
    (alarm,) = watched(resources, "WorkflowRunner", "ProjectionLagSeconds").values()
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "workflow-runner"}]
    assert alarm["Statistic"] == "Maximum"
    assert (alarm["Period"], alarm["EvaluationPeriods"]) == (60, 5)
    assert alarm["Threshold"] == 300 and alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == alarm["OKActions"] == [{"Ref": "AlarmTopic"}]


def test_worker_failures_notify_at_once_and_page_only_when_they_persist(
    resources: dict[str, Any],
) -> None:
    """A delivery or a task that failed for good is usually a partner's outage or a task's
    bug, not the engine's: a notice on the first failure, a page only after half an hour of
    failures in every 5 minutes. Both watch what StepDispatcher emits (report_work)."""
    for metric in ("DeliveriesFailed", "TasksFailed"):
        notice = alarms(resources)[f"{metric}Alarm"]
        persistent = alarms(resources)[f"{metric}PersistentAlarm"]
        for alarm in (notice, persistent):
            assert (alarm["Namespace"], alarm["MetricName"]) == ("WorkflowRunner", metric)
            assert alarm["Dimensions"] == [{"Name": "service", "Value": "workflow-runner"}]
            assert alarm["Statistic"] == "Sum" and alarm["Threshold"] == 0
            assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
            assert alarm["TreatMissingData"] == "notBreaching"
        assert notice["AlarmActions"] == [{"Ref": "NoticeTopic"}]
        assert (notice["Period"], notice["EvaluationPeriods"]) == (300, 1)
        assert persistent["AlarmActions"] == persistent["OKActions"] == [{"Ref": "AlarmTopic"}]
        periods = persistent["EvaluationPeriods"]
        assert persistent["DatapointsToAlarm"] == periods
        assert persistent["Period"] * periods == 1800


# --- gradual deployments --------------------------------------------------------------------------


def test_canary_deployments_roll_back_on_each_functions_errors(
    transform: Callable[..., Transformed],
) -> None:
    resources = transform(DeploymentType="Canary10Percent5Minutes")["Resources"]
    for function in DATABASE_FUNCTIONS:
        group = resources[f"{function}DeploymentGroup"]["Properties"]
        assert "Canary10Percent5Minutes" in str(group["DeploymentConfigName"])
        assert group["AlarmConfiguration"]["Alarms"] == [
            {"Name": {"Ref": function.replace("Function", "ErrorsAlarm")}}
        ]
        assert "DEPLOYMENT_STOP_ON_ALARM" in group["AutoRollbackConfiguration"]["Events"]
        live = resources[f"{function}Aliaslive"]
        assert "CodeDeployLambdaAliasUpdate" in live["UpdatePolicy"]
    # Every event source reaches the functions through the alias that traffic shifts.
    for mapping in of_type(resources, "AWS::Lambda::EventSourceMapping").values():
        assert mapping["Properties"]["FunctionName"]["Ref"].endswith("Aliaslive")
    for rule in of_type(resources, "AWS::Events::Rule").values():
        for target in rule["Properties"]["Targets"]:
            arn = target["Arn"]
            if "Ref" in arn:
                assert arn["Ref"].endswith("Aliaslive")
