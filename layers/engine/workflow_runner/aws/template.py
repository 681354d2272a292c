"""Read template.yaml the way CloudFormation would, for tests and the local runtime:
the EventBridge routes (rule -> intake queue -> event source mapping -> function, with
patterns and parameters resolved), and the functions' handlers loaded from their CodeUri.

Needs PyYAML (a dev dependency; never used inside Lambda).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .patterns import matches

Handler = Callable[[dict[str, Any], Any], Any]

_NO_VALUE = object()


def load_template(path: str | Path) -> dict[str, Any]:
    """Parse a CloudFormation/SAM template, turning short-form tags (!Ref, !If, ...)
    into their long form ({"Ref": ...}, {"Fn::If": ...})."""
    import yaml  # type: ignore[import-untyped]

    # libyaml's loader when PyYAML has it: ten times faster on this template, which the
    # local runtime and every test environment read.
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Loader(base):  # type: ignore[misc,valid-type]
        pass

    def construct(loader: Any, suffix: str, node: Any) -> dict[str, Any]:
        name = suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}"
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if name == "Fn::GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {name: value}

    _Loader.add_multi_constructor("!", construct)
    with open(path, encoding="utf-8") as handle:
        loaded = yaml.load(handle, Loader=_Loader)  # a SafeLoader subclass
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} is not a template")
    return loaded


class Resolver:
    """Evaluates the intrinsic functions the template uses, for given parameters."""

    def __init__(self, template: Mapping[str, Any], parameters: Mapping[str, Any] | None = None):
        self.template = template
        self.params: dict[str, Any] = {}
        for name, spec in (template.get("Parameters") or {}).items():
            value = (parameters or {}).get(name, spec.get("Default"))
            if spec.get("Type") in ("CommaDelimitedList",) or str(spec.get("Type", "")).startswith(
                "List<"
            ):
                value = [v.strip() for v in str(value or "").split(",")] if value != "" else [""]
            elif spec.get("Type") == "Number" and value is not None:
                value = str(value)  # CloudFormation hands every parameter on as a string
            self.params[name] = value
        self.params.update(
            {
                "AWS::Region": "eu-central-1",
                "AWS::AccountId": "123456789012",
                "AWS::StackName": "workflow-runner",
                "AWS::Partition": "aws",
                "AWS::URLSuffix": "amazonaws.com",
            }
        )

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [r for r in (self.resolve(n) for n in node) if r is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return _NO_VALUE
                return self.params.get(arg, arg)
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::If":
                name, yes, no = arg
                return self.resolve(yes if self.condition(name) else no)
            if key == "Fn::Equals":
                a, b = (self.resolve(x) for x in arg)
                return a == b
            if key == "Fn::Not":
                return not self.resolve(arg[0])
            if key == "Fn::And":
                return all(self.resolve(x) for x in arg)
            if key == "Fn::Or":
                return any(self.resolve(x) for x in arg)
            if key == "Fn::Join":
                sep, items = arg
                return str(sep).join(str(x) for x in self.resolve(items))
            if key == "Fn::Split":
                sep, text = arg
                return str(self.resolve(text)).split(sep)
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::GetAtt":
                return ".".join(arg)
            if key == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                for name, value in self.params.items():
                    text = text.replace("${" + name + "}", str(value))
                return text
        out = {}
        for key, value in node.items():
            resolved = self.resolve(value)
            if resolved is not _NO_VALUE:
                out[key] = resolved
        return out


@dataclass(frozen=True)
class Route:
    """One EventBridge rule that (directly, or through an SQS intake queue and its event
    source mapping) delivers to one function."""

    function: str  # logical id, e.g. TriggerProjectionFunction
    rule: str  # the rule's logical id, or the event's name in the function's Events
    pattern: dict[str, Any]
    queue: str | None = None  # logical id of the SQS queue between the rule and the function

    def accepts(self, event: Mapping[str, Any]) -> bool:
        return matches(self.pattern, event)


def functions(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's AWS::Serverless::Function resources by logical id."""
    return {
        name: resource
        for name, resource in (template.get("Resources") or {}).items()
        if resource.get("Type") == "AWS::Serverless::Function"
    }


def _logical_id(reference: Any) -> str | None:
    """The resource a Ref / GetAtt points at: {"Ref": "Fn"}, {"Ref": "Fn.Alias"} (SAM's
    generated alias), {"Fn::GetAtt": ["Queue", "Arn"]}; None for anything else."""
    if isinstance(reference, Mapping):
        if isinstance(reference.get("Ref"), str):
            return str(reference["Ref"]).split(".", 1)[0]
        target = reference.get("Fn::GetAtt")
        if isinstance(target, list) and target and isinstance(target[0], str):
            return target[0]
    return None


def _queue_consumers(template: Mapping[str, Any]) -> dict[str, list[str]]:
    """SQS queue logical id -> the functions polling it: explicit event source mappings
    and SAM ``SQS`` events alike."""
    resources = template.get("Resources") or {}
    consumers: dict[str, list[str]] = {}
    for resource in resources.values():
        if resource.get("Type") != "AWS::Lambda::EventSourceMapping":
            continue
        props = resource.get("Properties") or {}
        queue, function = (
            _logical_id(props.get("EventSourceArn")),
            _logical_id(props.get("FunctionName")),
        )
        if queue and function in functions(template):
            consumers.setdefault(queue, []).append(function)
    for name, resource in functions(template).items():
        for source in ((resource.get("Properties") or {}).get("Events") or {}).values():
            if source.get("Type") == "SQS":
                queue = _logical_id((source.get("Properties") or {}).get("Queue"))
                if queue:
                    consumers.setdefault(queue, []).append(name)
    return consumers


def event_routes(
    template: Mapping[str, Any], parameters: Mapping[str, Any] | None = None
) -> list[Route]:
    """Every way an EventBridge event reaches a function, patterns resolved: an
    ``AWS::Events::Rule`` targeting an SQS queue polled by a function (rule -> queue ->
    event source mapping -> function) or targeting the function itself, and a function's
    SAM ``EventBridgeRule`` events. Rules in template order, each function once per rule."""
    resolver = Resolver(template, parameters)
    resources = template.get("Resources") or {}
    known = functions(template)
    consumers = _queue_consumers(template)
    routes: list[Route] = []
    for rule, resource in resources.items():
        if resource.get("Type") != "AWS::Events::Rule":
            continue
        props = resource.get("Properties") or {}
        if "EventPattern" not in props:
            continue  # a schedule
        pattern = resolver.resolve(props["EventPattern"])
        for target in props.get("Targets") or []:
            arn = _logical_id(target.get("Arn"))
            if arn in known:
                routes.append(Route(arn, rule, pattern))
            for function in consumers.get(arn or "", []):
                routes.append(Route(function, rule, pattern, queue=arn))
    for name, resource in known.items():
        for event, source in ((resource.get("Properties") or {}).get("Events") or {}).items():
            if source.get("Type") == "EventBridgeRule":
                pattern = resolver.resolve(source["Properties"]["Pattern"])
                routes.append(Route(name, event, pattern))
    return routes


def route(routes: list[Route], event: Mapping[str, Any]) -> list[str]:
    """Logical ids of the functions whose rules accept the event."""
    return [r.function for r in routes if r.accepts(event)]


def load_handlers(template_path: str | Path) -> dict[str, Handler]:
    """Import each function's handler from ``<template dir>/<CodeUri>/<module>.py``."""
    template_path = Path(template_path)
    template = load_template(template_path)
    handlers: dict[str, Handler] = {}
    for name, resource in functions(template).items():
        props = resource.get("Properties") or {}
        module_name, attr = str(props["Handler"]).rsplit(".", 1)
        file = template_path.parent / str(props["CodeUri"]) / f"{module_name}.py"
        spec = importlib.util.spec_from_file_location(f"wfr_function_{name}", file)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {file}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        handlers[name] = getattr(module, attr)
    return handlers
