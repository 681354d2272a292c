"""Definition-time checks: every static argument of a workflow, reported with its place.

`define_workflow` hands the user's `steps=lambda s: [...]` a `PlacingBuilder`: a step
the builder refuses becomes an `Unbuilt` placeholder instead of an exception, so that
once the whole tree is built, one walk can say where each problem sits:

    order-approval › step 1 (wait_for_event) › timeout: "3 days" is neither a duration …

Steps are numbered from 0 within their list, as `stepIndex` is on run streams. The walk
checks static values only; what a lambda or a reference produces is checked when the
step runs (and a bad value fails the run with `reason: invalid_argument:<argument>`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..cron import CronSchedule
from ..errors import (
    DefinitionArgumentError,
    InvalidEventMatch,
    InvalidInput,
    WorkflowDefinitionError,
)
from ..match import validate_event_match
from ..refs import Ref, refs_in
from ..retention import parse_retention
from ..storable import NotStorable, check_storable
from .dsl import (
    CATCHUP_POLICIES,
    AwaitCallback,
    Branch,
    BranchResult,
    CallWorkflow,
    Compute,
    CreateCallback,
    CronTrigger,
    ForEach,
    MailSend,
    Map,
    Parallel,
    Retry,
    Return,
    Step,
    Task,
    Wait,
    WaitForCallback,
    WaitForCondition,
    WaitForEvent,
    WebhookSend,
    WorkflowDefinition,
)
from .time_arguments import check_duration, check_duration_or_instant, check_instant, shown

_BUILDER_PREFIX = re.compile(r"^\w+(\(.*?\))?: ")
_KIND_NAMES = {"mail.send": "mail_send", "webhook.send": "webhook_send", "return_": "return"}


@dataclass(frozen=True)
class Unbuilt:
    """A step the builder refused, kept in its place in the tree until the walk reports it."""

    kind: str
    message: str
    argument: str | None = None


def _argument_of(
    method: Callable[..., Any], args: Any, kwargs: Any, error: Exception, message: str
) -> str | None:
    """The argument the builder refused: the match for an EventMatch error, else the one
    whose text the message quotes (e.g. a duration it could not parse), if any."""
    try:
        bound = inspect.signature(method).bind(*args, **kwargs)
    except TypeError:
        return None
    if isinstance(error, InvalidEventMatch) and "match" in bound.arguments:
        return "match"
    for name, value in bound.arguments.items():
        if isinstance(value, str) and value and (f'"{value}"' in message or repr(value) in message):
            return name
    return None


class PlacingBuilder:
    """The step builder as the user's `steps=` function sees it: every method of `inner`,
    but a call it refuses returns an `Unbuilt` placeholder instead of raising."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)
        if name.startswith("_") or not callable(method):
            return method

        def build(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except DefinitionArgumentError as error:
                return Unbuilt(name, error.detail, error.argument)
            except (WorkflowDefinitionError, InvalidInput) as error:
                message = _BUILDER_PREFIX.sub("", str(error), count=1)
                return Unbuilt(name, message, _argument_of(method, args, kwargs, error, message))

        return build


@dataclass(frozen=True)
class DefinitionProblem:
    """One thing wrong with a definition, and where."""

    workflow: str
    place: str  # e.g. "step 3 (branch) › on_true › step 0 (webhook_send)"
    argument: str | None
    message: str

    def __str__(self) -> str:
        argument = f" › {self.argument}" if self.argument else ""
        return f"{self.workflow} › {self.place}{argument}: {self.message}"


class DefinitionProblems(WorkflowDefinitionError):
    """A definition with problems; `problems` lists each with its place."""

    def __init__(self, problems: Sequence[DefinitionProblem]) -> None:
        self.problems = list(problems)
        if len(self.problems) == 1:
            text = str(self.problems[0])
        else:
            lines = "\n".join(f"  {p}" for p in self.problems)
            name = self.problems[0].workflow
            text = f"workflow {name!r} has {len(self.problems)} problems:\n{lines}"
        super().__init__(text)


def _placeholder(value: Any) -> Any:
    """`value` with every reference replaced by a scalar, to check the shape around it."""
    if isinstance(value, Ref):
        return 0
    if isinstance(value, Mapping):
        return {k: _placeholder(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_placeholder(v) for v in value]
    return value


def _match_placeholder(match: Mapping[str, Any]) -> Any:
    """A match with references replaced, where an `in` list that is a reference becomes []."""

    def walk(node: Any) -> Any:
        if isinstance(node, Mapping):
            if node.get("kind") == "in" and isinstance(node.get("values"), Ref):
                return {**node, "values": []}
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return 0 if isinstance(node, Ref) else node

    return walk(match)


def _static(value: Any) -> bool:
    """A value fixed at definition time: not None, not a function of ctx and not a
    reference (a reference is a resolver, callable), though it may hold references."""
    return value is not None and not callable(value)


@dataclass
class _Writer:
    key: str
    place: str
    arms: tuple[tuple[str, str], ...]  # (branch place, arm) on the way to the step


@dataclass
class _Walk:
    definition: WorkflowDefinition
    problems: list[DefinitionProblem] = field(default_factory=list)
    writers: list[_Writer] = field(default_factory=list)
    uses: list[tuple[Ref, str, str, tuple[str, ...]]] = field(default_factory=list)
    in_branch: int = 0  # how many parallels' branches the walk is inside

    def problem(self, place: str, argument: str | None, message: str) -> None:
        self.problems.append(DefinitionProblem(self.definition.name, place, argument, message))

    def check(self, place: str, argument: str, test: Callable[[], object]) -> None:
        try:
            test()
        except (InvalidInput, WorkflowDefinitionError, ValueError, TypeError) as error:
            self.problem(place, argument, str(error))

    # --- the tree -----------------------------------------------------------------

    def steps(
        self,
        steps: Sequence[Step | Unbuilt],
        prefix: str,
        arms: tuple[tuple[str, str], ...],
        scopes: tuple[str, ...],
    ) -> None:
        for index, step in enumerate(steps):
            kind = _KIND_NAMES.get(step.kind, step.kind)
            self.step(step, f"{prefix}step {index} ({kind})", arms, scopes)

    def step(
        self,
        step: Step | Unbuilt,
        place: str,
        arms: tuple[tuple[str, str], ...],
        scopes: tuple[str, ...],
    ) -> None:
        if isinstance(step, Unbuilt):
            self.problem(place, step.argument, step.message)
            return
        for argument, value in _arguments(step):
            # A map's key sees the item it names (ctx.scope["item"], ["index"]).
            around = (*scopes, "item", "index") if isinstance(step, Map) else scopes
            for reference in refs_in(value):
                self.uses.append((reference, place, argument, around))
        if isinstance(step, Branch):
            self.steps(step.on_true, f"{place} › on_true › ", (*arms, (place, "true")), scopes)
            self.steps(step.on_false, f"{place} › on_false › ", (*arms, (place, "false")), scopes)
        elif isinstance(step, ForEach):
            self.over(place, step.over)
            self.steps(step.do, f"{place} › do › ", arms, (*scopes, step.as_))
        elif isinstance(step, Retry):
            self.steps(step.do, f"{place} › do › ", arms, scopes)
        elif isinstance(step, Parallel) and step.branches is not None:
            self.in_branch += 1
            for k, lane in enumerate(step.branches):
                # Branches run apart (each its own child run): their keys never meet.
                self.steps(lane, f"{place} › branch {k} › ", (*arms, (place, f"b{k}")), scopes)
            self.in_branch -= 1
        elif isinstance(step, Parallel):
            self.steps(step.steps, f"{place} › ", arms, scopes)
        elif isinstance(step, Map):
            self.over(place, step.over)
        elif isinstance(step, Wait):
            self.wait(place, step)
        elif isinstance(step, WaitForEvent):
            self.wait_for_event(place, step)
        elif isinstance(step, (WaitForCallback, CreateCallback)) and _static(step.timeout):
            self.check(place, "timeout", lambda: check_duration_or_instant(step.timeout))
        elif isinstance(step, MailSend):
            self.mail(place, step)
        elif isinstance(step, WebhookSend):
            self.webhook(place, step)
        if isinstance(step, (Task, MailSend, WebhookSend)) and step.retry is not None:
            for argument, message in step.retry.problems:
                self.problem(place, f"retry › {argument}", message)
        elif isinstance(step, Return) and self.in_branch:
            self.problem(
                place,
                None,
                "return_ inside a parallel's branch would end only the branch; "
                "use s.branch_result(value)",
            )
        elif isinstance(step, BranchResult) and not self.in_branch:
            self.problem(place, None, "branch_result belongs inside s.parallel(branches=[...])")
        elif isinstance(step, (Return, BranchResult)) and _static(step.value):
            self.check(place, "value", lambda: _storable(step.value, "the return value"))
        for key in _written_keys(step):
            self.writers.append(_Writer(key, place, arms))

    # --- arguments ------------------------------------------------------------------

    def over(self, place: str, over: Any) -> None:
        if _static(over) and (
            isinstance(over, (str, bytes, Mapping)) or not isinstance(over, Sequence)
        ):
            self.problem(place, "over", f"{shown(over)} is not a list (or a function of ctx)")

    def wait(self, place: str, step: Wait) -> None:
        if _static(step.for_):
            self.check(place, "for_", lambda: check_duration(step.for_, "for_", "until="))
        if _static(step.until):
            self.check(place, "until", lambda: check_instant(step.until))

    def wait_for_event(self, place: str, step: WaitForEvent) -> None:
        if _static(step.timeout):
            self.check(place, "timeout", lambda: check_duration_or_instant(step.timeout))
        if _static(step.lookback):
            self.check(place, "lookback", lambda: check_duration(step.lookback, "lookback", None))
        match = step.match
        if _static(match):
            if not isinstance(match, Mapping):
                self.problem(
                    place,
                    "match",
                    f"{shown(match)} is not an EventMatch: build one with eq(), in_(), "
                    "all_of(), ... (workflow_runner.match) or give a function of ctx",
                )
            else:
                self.check(place, "match", lambda: validate_event_match(_match_placeholder(match)))

    def mail(self, place: str, step: MailSend) -> None:
        if _static(step.to):
            to = [step.to] if isinstance(step.to, str) else step.to
            if not isinstance(to, (list, tuple)) or not to or not all(_address(a) for a in to):
                self.problem(place, "to", f"{shown(step.to)} is not an address or a list of them")
        if _static(step.from_) and not _address(step.from_):
            self.problem(place, "from_", f"{shown(step.from_)} is not an address")

    def webhook(self, place: str, step: WebhookSend) -> None:
        if _static(step.url):
            self.check(place, "url", lambda: _webhook_url(step.url))
        headers = step.headers
        if _static(headers) and not _string_map(headers):
            self.problem(place, "headers", f"{shown(headers)} must map strings to strings")
        if _static(step.body):
            self.check(place, "body", lambda: _storable(step.body, "the body"))
        auth = step.auth
        if _static(auth):
            self.check(place, "auth", lambda: _auth(auth))

    # --- across the tree ------------------------------------------------------------

    def keys(self) -> None:
        for later_index, later in enumerate(self.writers):
            for earlier in self.writers[:later_index]:
                if earlier.key == later.key and not _exclusive(earlier.arms, later.arms):
                    self.problem(
                        later.place,
                        None,
                        f"result key {later.key!r} is already written by {earlier.place}; "
                        "give each step its own key",
                    )
                    break

    def references(self) -> None:
        written = {w.key for w in self.writers}
        for reference, place, argument, scopes in self.uses:
            name = reference.path[1] if len(reference.path) > 1 else None
            if reference.root == "steps" and name is not None and name not in written:
                known = ", ".join(sorted(written)) or "none"
                self.problem(
                    place, argument, f"{reference.text}: no step stores {name!r} (keys: {known})"
                )
            elif reference.root == "scope" and name is not None and name not in scopes:
                around = ", ".join(scopes) or "none"
                self.problem(
                    place,
                    argument,
                    f"{reference.text}: no for_each around this step sets {name!r} "
                    f"(loop variables here: {around})",
                )


def _arguments(step: Step) -> list[tuple[str, Any]]:
    """The resolvable arguments of a step, by name (where references may sit)."""
    names: dict[type, tuple[str, ...]] = {
        Compute: ("fn",),
        Branch: ("if_",),
        ForEach: ("over",),
        Wait: ("for_", "until"),
        WaitForEvent: ("match", "timeout", "lookback"),
        MailSend: ("to", "subject", "body", "from_"),
        WebhookSend: ("url", "method", "headers", "body", "auth"),
        Task: ("fn",),
        CallWorkflow: ("input", "key"),
        Map: ("over", "key"),
        Return: ("value",),
        BranchResult: ("value",),
        **dict.fromkeys((WaitForCallback, CreateCallback), ("timeout",)),
        WaitForCondition: ("initial",),
    }
    return [(name, getattr(step, name)) for name in names.get(type(step), ())]


def _string_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, (str, Ref)) for k, v in value.items()
    )


def _address(value: Any) -> bool:
    return isinstance(value, Ref) or (isinstance(value, str) and "@" in value)


def _written_keys(step: Step) -> list[str]:
    if isinstance(step, (Compute, Task, WaitForCondition)):
        return [step.key]
    if isinstance(step, (WaitForEvent, WaitForCallback, AwaitCallback)):
        return [step.result_key]
    if isinstance(step, (MailSend, WebhookSend)):
        return [k for k in (step.key, step.result_key) if k]
    if isinstance(step, (CallWorkflow, Map, Parallel)) and step.result_key:
        return [step.result_key]
    return []


def _exclusive(a: tuple[tuple[str, str], ...], b: tuple[tuple[str, str], ...]) -> bool:
    """Whether two steps sit in different arms of one branch (only one of them runs)."""
    arms = dict(a)
    return any(place in arms and arms[place] != arm for place, arm in b)


def _storable(value: Any, what: str) -> None:
    try:
        check_storable(_placeholder(value), what)
    except NotStorable as error:
        raise ValueError(str(error)) from None


def _webhook_url(url: Any) -> None:
    if not isinstance(url, str):
        raise ValueError(f"{shown(url)} is not a URL")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a malformed port
    except ValueError as error:
        raise ValueError(f"{url!r} is not a URL: {error}") from None
    if parts.scheme.lower() not in ("https", "http"):
        raise ValueError(f"{url!r}: the scheme must be https (http only for allow-listed hosts)")
    if not parts.hostname:
        raise ValueError(f"{url!r} has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{url!r} carries credentials: use auth= or headers=")


def _auth(auth: Any) -> None:
    if isinstance(auth, Mapping):
        if auth.get("type") == "bearer" and isinstance(auth.get("token"), (str, Ref)):
            return
        if auth.get("type") == "basic" and all(
            isinstance(auth.get(k), (str, Ref)) for k in ("username", "password")
        ):
            return
    raise ValueError(
        "auth must be {'type': 'bearer', 'token': ...} or "
        "{'type': 'basic', 'username': ..., 'password': ...}"
    )


def _catchup(catchup: object) -> None:
    if catchup not in CATCHUP_POLICIES:
        raise ValueError(f"must be one of {', '.join(CATCHUP_POLICIES)}, not {catchup!r}")


def check_definition(definition: WorkflowDefinition) -> None:
    """Check a built definition: every static argument, result keys written twice,
    references to results no step stores or loop variables no loop sets.

    Raises:
        DefinitionProblems: naming each problem's workflow, place, argument and value.
    """
    walk = _Walk(definition)
    trigger = definition.trigger
    if isinstance(trigger, CronTrigger):
        walk.check("trigger (on_cron)", "schedule", lambda: CronSchedule.parse(trigger.schedule))
        walk.check("trigger (on_cron)", "catchup", lambda: _catchup(trigger.catchup))
    if definition.retention is not None:
        walk.check("define_workflow", "retention", lambda: parse_retention(definition.retention))
    walk.steps(definition.steps, "", (), ())
    walk.keys()
    walk.references()
    if walk.problems:
        raise DefinitionProblems(walk.problems)
