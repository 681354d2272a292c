"""Declarative references: a step argument that reads the trigger event, a step result or
a loop variable, without a lambda.

    Event.payload["orderId"]       # ctx.event.payload["orderId"]
    Steps["approval"]["by"]        # ctx.steps["approval"]["by"]
    Scope["item"]["sku"]           # ctx.scope["item"]["sku"]
    ref("event.payload.orderId")   # the first one again, written as text

A reference is a resolver: it goes wherever a step takes a function of `ctx`, and it
may sit inside a static value (a match, a webhook body, a return value), where it is
replaced by what it points to when the step runs. Unlike a lambda, `wfr graph` prints
it, the definition checks see it (a reference to a result no step stores is an error
at import) and its path text is part of the definition's fingerprint.

Pure: no I/O, nothing from the layers above (a resolver's argument is duck-typed).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from .durations import format_instant
from .errors import WorkflowDefinitionError, WorkflowRunnerError

__all__ = [
    "Event",
    "Ref",
    "Scope",
    "Steps",
    "UnresolvedReference",
    "contains_refs",
    "ref",
    "refs_in",
    "substitute_refs",
]

Segment = str | int

ROOTS: Final = ("event", "steps", "scope", "workflow")
EVENT_FIELDS: Final = ("id", "type", "payload", "tenant_id", "time", "source")
WORKFLOW_FIELDS: Final = (
    "run_id",
    "workflow_name",
    "step_index",
    "retry_attempt",
    "definition_fingerprint",
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_TEXT_SEGMENT = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


class UnresolvedReference(WorkflowRunnerError):
    """A reference points at something the run does not have (a missing payload field,
    a result no step stored yet, an index past the end of a list). A run that meets one
    fails with `reason: unresolved_reference:<the reference's path>` (the path comes from
    the definition, never from the data)."""

    def __init__(self, reference: Ref, problem: str) -> None:
        super().__init__(f"{reference.text}: {problem}")
        self.path = reference.text
        self.reason = f"unresolved_reference:{reference.text}"


def _show(segment: Segment) -> str:
    if isinstance(segment, int):
        return f"[{segment}]"
    return f".{segment}" if _IDENTIFIER.fullmatch(segment) else f"[{segment!r}]"


@dataclass(frozen=True, eq=False)
class Ref:
    """A path into what a step can see: `path[0]` is the root (event, steps, scope or
    workflow), the rest are attribute names, mapping keys and list indexes.

    Build references with `Event`, `Steps`, `Scope` or `ref(...)`, not directly.
    """

    path: tuple[Segment, ...]

    def __getitem__(self, key: Segment) -> Ref:
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise WorkflowDefinitionError(
                f"{self.text}[{key!r}]: a reference takes string keys and integer indexes"
            )
        if self.path == ("event",):
            raise WorkflowDefinitionError(
                f"Event[{key!r}]: use Event.payload[{key!r}] (or Event.id, Event.type, ...)"
            )
        return Ref((*self.path, key))

    @property
    def root(self) -> str:
        return str(self.path[0])

    @property
    def text(self) -> str:
        """The path as text, e.g. `event.payload.orderId` or `steps.items[0]`."""
        return self.root + "".join(_show(s) for s in self.path[1:])

    def __repr__(self) -> str:
        return f"ref({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Ref):
            return self.path == other.path
        # `Steps["total"] == 0` would otherwise be a plain False at import time and a
        # branch that never runs; say so instead.
        raise TypeError(
            f"{self.text} is a reference, resolved when the step runs: it cannot be compared "
            "at definition time (use a lambda of ctx for a computed condition)"
        )

    def __hash__(self) -> int:
        return hash(self.path)

    def __bool__(self) -> bool:
        raise TypeError(
            f"{self.text} is a reference, resolved when the step runs: it has no truth value "
            "at definition time (pass it as the argument itself, or use a lambda of ctx)"
        )

    def __call__(self, source: Any) -> Any:
        """Resolve against a step's `ctx` (or, for `event` references, a DomainEvent, so a
        reference can be an idempotency key).

        Raises:
            UnresolvedReference: the path leads nowhere for this run.
        """
        steps = getattr(source, "steps", None)
        if steps is None:
            if self.root != "event":
                raise UnresolvedReference(self, "only event references work here")
            current: Any = source
            rest = self.path[1:]
        elif self.root == "event":
            current, rest = source.event, self.path[1:]
        elif self.root == "workflow":
            current, rest = source.workflow, self.path[1:]
        else:
            current = steps if self.root == "steps" else source.scope
            rest = self.path[1:]
        attribute_depth = 1 if self.root in ("event", "workflow") else 0
        for depth, segment in enumerate(rest):
            if depth < attribute_depth:
                current = getattr(current, str(segment))
            elif isinstance(current, Mapping):
                if segment not in current:
                    raise UnresolvedReference(self, f"no {segment!r} in {self._upto(depth)}")
                current = current[segment]
            elif isinstance(current, Sequence) and not isinstance(current, (str, bytes)):
                index = _index(segment)
                if index is None or not -len(current) <= index < len(current):
                    raise UnresolvedReference(self, f"no [{segment}] in {self._upto(depth)}")
                current = current[index]
            else:
                raise UnresolvedReference(
                    self,
                    f"{self._upto(depth)} is {type(current).__name__}, not an object or a list",
                )
        return format_instant(current) if isinstance(current, datetime) else current

    def _upto(self, depth: int) -> str:
        """The text of the container the segment after `depth` segments is looked up in."""
        return Ref(self.path[: depth + 1]).text


def _index(segment: Segment) -> int | None:
    if isinstance(segment, int):
        return segment
    return int(segment) if segment.isdigit() else None


class _EventRoot(Ref):
    """`Event`: the trigger event's fields (`Event.payload[...]`, `Event.id`, ...)."""

    @property
    def id(self) -> Ref:
        return Ref(("event", "id"))

    @property
    def type(self) -> Ref:
        return Ref(("event", "type"))

    @property
    def payload(self) -> Ref:
        return Ref(("event", "payload"))

    @property
    def tenant_id(self) -> Ref:
        return Ref(("event", "tenant_id"))

    @property
    def time(self) -> Ref:
        """The event's time as an ISO-8601 instant."""
        return Ref(("event", "time"))

    @property
    def source(self) -> Ref:
        return Ref(("event", "source"))


Event: Final = _EventRoot(("event",))
Steps: Final = Ref(("steps",))
Scope: Final = Ref(("scope",))


def ref(text: str) -> Ref:
    """A reference from its text: `event.payload.orderId`, `steps.approval.by`,
    `scope.item.sku`, `steps.lines[0]`, `workflow.run_id`.

    Raises:
        WorkflowDefinitionError: the text is not a path from a known root.
    """
    if not isinstance(text, str) or not text:
        raise WorkflowDefinitionError(f"ref({text!r}): expected a path such as 'event.payload.x'")
    segments: list[Segment] = []
    position = 0
    for found in _TEXT_SEGMENT.finditer(text):
        dotted = found.group(0).startswith(".")
        if found.start() != position or dotted != (bool(segments) and found.group(1) is not None):
            break
        segments.append(found.group(1) if found.group(1) is not None else int(found.group(2)))
        position = found.end()
    if position != len(text) or not segments:
        raise WorkflowDefinitionError(
            f"ref({text!r}): expected dotted names and [n] indexes, e.g. 'event.payload.items[0]'"
        )
    root = segments[0]
    if root not in ROOTS:
        raise WorkflowDefinitionError(
            f"ref({text!r}): unknown root {root!r} (expected one of {', '.join(ROOTS)})"
        )
    fields = EVENT_FIELDS if root == "event" else WORKFLOW_FIELDS if root == "workflow" else None
    if fields is not None and (len(segments) < 2 or segments[1] not in fields):
        raise WorkflowDefinitionError(f"ref({text!r}): {root} has the fields {', '.join(fields)}")
    return Ref(tuple(segments))


def contains_refs(value: Any) -> bool:
    """True when `value` is a reference or a list / mapping with one inside."""
    return next(refs_in(value), None) is not None


def refs_in(value: Any) -> Iterator[Ref]:
    """Every reference inside `value` (itself, list items, mapping values), depth first."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, Ref):
            yield current
        elif isinstance(current, Mapping):
            stack.extend(reversed(list(current.values())))
        elif isinstance(current, (list, tuple)):
            stack.extend(reversed(current))


def substitute_refs(value: Any, ctx: Any) -> Any:
    """`value` with every reference inside it resolved against `ctx`; `value` itself
    (not a copy) when it holds none.

    Raises:
        UnresolvedReference: a reference leads nowhere for this run.
    """
    if isinstance(value, Ref):
        return value(ctx)
    if isinstance(value, Mapping):
        if not contains_refs(value):
            return value
        return {key: substitute_refs(item, ctx) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        if not contains_refs(value):
            return value
        return [substitute_refs(item, ctx) for item in value]
    return value
