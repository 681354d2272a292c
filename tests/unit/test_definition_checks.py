"""Errors at definition time: every static argument is checked when the module is
imported, and the error names the workflow, the step path, the argument and the value."""

from __future__ import annotations

from typing import Any

import pytest
from workflow_runner import Event, RetryPolicy, Scope, Steps, define_workflow, on_cron, on_event
from workflow_runner.definition.checks import DefinitionProblems
from workflow_runner.errors import WorkflowDefinitionError
from workflow_runner.match import eq, in_

AWAITS = {"approved": "order.approved"}


def _define(steps: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("trigger", on_event("order.placed"))
    return define_workflow(
        name="order-approval", awaits=AWAITS, register=False, steps=steps, **kwargs
    )


def _problems(steps: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(DefinitionProblems) as raised:
        _define(steps, **kwargs)
    return [str(p) for p in raised.value.problems]


MAIL = {"to": "ops@example.com", "subject": "s", "body": "b"}


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        # durations and instants
        (
            lambda s: [s.mail_send(**MAIL), s.wait_for_event("approved", timeout="3 days")],
            "order-approval › step 1 (wait_for_event) › timeout: '3 days' is neither a "
            'duration (ISO-8601 such as "PT1H" or "P3D", or a number and a unit such as '
            '"90s", "30m", "6h", "3d" or "1w") nor an instant',
        ),
        (
            lambda s: [s.wait(for_="P1X")],
            'order-approval › step 0 (wait) › for_: Invalid duration "P1X" — expected ISO-8601 '
            'such as "PT1H" or "P3D", or a number and a unit such as "90s"',
        ),
        (
            lambda s: [s.wait(for_=90)],
            "order-approval › step 0 (wait) › for_: 90 is not a duration: expected ISO-8601",
        ),
        (
            lambda s: [s.wait(until="P1D")],
            "order-approval › step 0 (wait) › until: 'P1D' is a duration; until takes an "
            "instant, for_= a duration",
        ),
        (
            lambda s: [s.wait(until="2030-01-01T09:00:00")],
            "order-approval › step 0 (wait) › until: '2030-01-01T09:00:00' is not an ISO-8601 "
            "instant with an offset",
        ),
        (
            lambda s: [s.wait_for_event("approved", lookback="1 hour")],
            'order-approval › step 0 (wait_for_event) › lookback: Invalid duration "1 hour"',
        ),
        # match shape
        (
            lambda s: [s.wait_for_event("approved", match={"version": 1, "expr": {"kind": "x"}})],
            "order-approval › step 0 (wait_for_event) › match: EventMatch invalid at expr: "
            'unknown expression kind "x"',
        ),
        (
            lambda s: [s.wait_for_event("approved", match="orderId == 1")],
            "order-approval › step 0 (wait_for_event) › match: 'orderId == 1' is not an EventMatch",
        ),
        (
            lambda s: [s.wait_for_event("approved", match=eq("orderId", [1, 2]))],
            "order-approval › step 0 (wait_for_event) › match: EventMatch invalid at "
            "expr.op.value: expected a JSON scalar, got list",
        ),
        # awaits declared
        (
            lambda s: [s.wait_for_event("shipped")],
            "order-approval › step 0 (wait_for_event) › event: 'shipped' is not declared in "
            "awaits (names: 'approved'; or an event type: 'order.approved'); add it to awaits=",
        ),
        # webhook URL, headers, auth, body; mail addresses
        (
            lambda s: [s.webhook_send(url="hooks.example.com/x")],
            "order-approval › step 0 (webhook_send) › url: 'hooks.example.com/x': the scheme "
            "must be https",
        ),
        (
            lambda s: [s.webhook_send(url="ftp://hooks.example.com/x")],
            "order-approval › step 0 (webhook_send) › url: 'ftp://hooks.example.com/x': the "
            "scheme must be https",
        ),
        (
            lambda s: [s.webhook_send(url="https://user:pw@hooks.example.com/x")],
            "› url: 'https://user:pw@hooks.example.com/x' carries credentials",
        ),
        (
            lambda s: [s.webhook_send(url="https://h.example.com", headers={"x": 1})],
            "order-approval › step 0 (webhook_send) › headers: {'x': 1} must map strings to "
            "strings",
        ),
        (
            lambda s: [s.webhook_send(url="https://h.example.com", auth={"type": "oauth"})],
            "order-approval › step 0 (webhook_send) › auth: auth must be {'type': 'bearer'",
        ),
        (
            lambda s: [s.webhook_send(url="https://h.example.com", body={"at": {1, 2}})],
            "order-approval › step 0 (webhook_send) › body: the body is not JSON",
        ),
        (
            lambda s: [s.webhook_send(url="https://h.example.com", method="GET")],
            "order-approval › step 0 (webhook_send) › method: method must be POST, PUT or "
            "PATCH, not 'GET'",
        ),
        (
            lambda s: [s.mail_send(to="ops", subject="s", body="b")],
            "order-approval › step 0 (mail_send) › to: 'ops' is not an address or a list of them",
        ),
        (
            lambda s: [s.mail_send(**MAIL, from_="noreply")],
            "order-approval › step 0 (mail_send) › from_: 'noreply' is not an address",
        ),
        (
            lambda s: [s.return_({"ratio": float("inf")})],
            "order-approval › step 0 (return) › value: the return value is not JSON",
        ),
        (
            lambda s: [s.for_each(over="abc", as_="c", do=[])],
            "order-approval › step 0 (for_each) › over: 'abc' is not a list",
        ),
        # retry, task and delivery parameters
        (
            lambda s: [s.retry(times=0, do=[s.compute("a", lambda ctx: 1)])],
            "order-approval › step 0 (retry): times must be an integer >= 1",
        ),
        (
            lambda s: [s.retry(times=3, base="10 s", do=[s.compute("a", lambda ctx: 1)])],
            'order-approval › step 0 (retry) › base: Invalid duration "10 s"',
        ),
        (
            lambda s: [s.retry(times=3, backoff="random", do=[])],
            "order-approval › step 0 (retry) › backoff: must be linear, exponential or fixed, "
            "not 'random'",
        ),
        (
            lambda s: [s.task("charge", lambda ctx: 1, timeout="PT20M")],
            "order-approval › step 0 (task) › timeout: timeout 'PT20M' must be longer than zero "
            "and at most PT14M",
        ),
        (
            lambda s: [s.task("charge", lambda ctx: 1, timeout="30 secs")],
            'order-approval › step 0 (task) › timeout: Invalid duration "30 secs"',
        ),
        (
            lambda s: [s.task("charge", lambda ctx: 1, retry=3)],
            "order-approval › step 0 (task): retry must be a RetryPolicy",
        ),
        (
            lambda s: [s.webhook_send(url="https://h.example.com", catch=True)],
            "order-approval › step 0 (webhook_send): catch=True needs result_key=",
        ),
        # nested places
        (
            lambda s: [
                s.mail_send(**MAIL),
                s.branch(
                    if_=True,
                    on_true=[s.for_each(over=[1], as_="i", do=[s.wait(for_="soon")])],
                ),
            ],
            "order-approval › step 1 (branch) › on_true › step 0 (for_each) › do › step 0 "
            '(wait) › for_: Invalid duration "soon"',
        ),
    ],
)
def test_each_kind_of_static_argument_is_checked_with_its_place(build: Any, expected: str) -> None:
    [problem] = _problems(build)
    assert problem.startswith(expected) or expected in problem, problem


def test_a_cron_schedule_is_checked_with_the_workflow_named() -> None:
    [problem] = _problems(lambda s: [s.return_()], trigger=on_cron("61 * * * *"))
    assert problem.startswith("order-approval › trigger (on_cron) › schedule: Invalid cron")


def test_a_retry_policy_error_names_the_workflow_and_the_value() -> None:
    with pytest.raises(WorkflowDefinitionError, match=r"order-approval.*max_attempts: must be an"):
        _define(lambda s: [s.task("t", lambda ctx: 1, retry=RetryPolicy(max_attempts=0))])


def test_a_bad_retry_policy_value_is_reported_at_the_step_that_uses_it() -> None:
    """A RetryPolicy built inside steps= is checked with the tree: its problems carry the
    step path and the argument, like every other static argument's."""
    problems = _problems(
        lambda s: [
            s.compute("a", lambda ctx: 1),
            s.branch(
                if_=True,
                on_true=[
                    s.task("t", lambda ctx: 1, retry=RetryPolicy(base="2 secs", max_attempts=0)),
                    s.webhook_send(
                        url="https://h.example.com",
                        result_key="hook",
                        retry=RetryPolicy(jitter="some"),  # type: ignore[arg-type]
                    ),
                ],
            ),
        ]
    )
    assert problems == [
        "order-approval › step 1 (branch) › on_true › step 0 (task) › retry › max_attempts: "
        "must be an integer >= 1, not 0",
        "order-approval › step 1 (branch) › on_true › step 0 (task) › retry › base: "
        'Invalid duration "2 secs" — expected ISO-8601 such as "PT1H" or "P3D", or a number '
        'and a unit such as "90s", "30m", "6h", "3d" or "1w"',
        "order-approval › step 1 (branch) › on_true › step 1 (webhook_send) › retry › jitter: "
        "must be none, full or equal, not 'some'",
    ]


def test_a_retry_policy_built_outside_a_definition_still_raises_where_it_is_built() -> None:
    with pytest.raises(WorkflowDefinitionError, match="RetryPolicy: max_attempts: must be"):
        RetryPolicy(max_attempts=0)


def test_a_wrong_awaits_name_lists_the_names_one_can_pass() -> None:
    [problem] = _problems(lambda s: [s.wait_for_event("aproved")])
    assert problem == (
        "order-approval › step 0 (wait_for_event) › event: 'aproved' is not declared in "
        "awaits; did you mean 'approved'? (names: 'approved'; or an event type: "
        "'order.approved')"
    )


def test_a_builder_error_raised_by_the_users_own_expression_names_the_workflow() -> None:
    with pytest.raises(WorkflowDefinitionError, match="workflow 'order-approval': in_: values"):
        _define(lambda s: [s.wait_for_event("approved", match=in_("status", "paid"))])


def test_result_keys_written_twice_are_refused_unless_in_different_arms() -> None:
    problems = _problems(
        lambda s: [
            s.compute("total", lambda ctx: 1),
            s.wait_for_event("approved", result_key="total"),
            s.retry(times=2, do=[s.task("charge", lambda ctx: 1)]),
            s.webhook_send(url="https://h.example.com", result_key="charge"),
            s.branch(
                if_=True,
                on_true=[s.compute("decision", lambda ctx: "yes")],
                on_false=[s.compute("decision", lambda ctx: "no")],
            ),
        ]
    )
    assert problems == [
        "order-approval › step 1 (wait_for_event): result key 'total' is already written by "
        "step 0 (compute); give each step its own key",
        "order-approval › step 3 (webhook_send): result key 'charge' is already written by "
        "step 2 (retry) › do › step 0 (task); give each step its own key",
    ]


def test_references_must_name_a_stored_result_or_an_enclosing_loop_variable() -> None:
    problems = _problems(
        lambda s: [
            s.wait_for_event("approved", match=eq("orderId", Event.payload["orderId"])),
            s.for_each(
                over=Steps["order.approved"]["lines"],
                as_="line",
                do=[s.webhook_send(url="https://h.example.com", body={"sku": Scope["line"]})],
            ),
            s.return_({"by": Steps["aproved"]["by"], "line": Scope["line"]}),
        ]
    )
    assert problems == [
        "order-approval › step 2 (return) › value: steps.aproved.by: no step stores "
        "'aproved' (keys: order.approved)",
        "order-approval › step 2 (return) › value: scope.line: no for_each around this step "
        "sets 'line' (loop variables here: none)",
    ]


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(DefinitionProblems) as raised:
        _define(
            lambda s: [
                s.wait(for_="1 day"),
                s.wait_for_event("approved", timeout="3 days"),
            ]
        )
    text = str(raised.value)
    assert text.startswith("workflow 'order-approval' has 2 problems:\n")
    assert "  order-approval › step 0 (wait) › for_" in text
    assert "  order-approval › step 1 (wait_for_event) › timeout" in text


def test_what_is_valid_stays_valid() -> None:
    wf = _define(
        lambda s: [
            s.wait(for_="PT1H"),
            s.wait(until="2030-01-01T09:00:00+02:00"),
            s.wait_for_event(
                "approved",
                match=eq("orderId", Event.payload["orderId"]),
                timeout="2030-02-01T00:00:00Z",
                lookback="PT0S",
            ),
            s.webhook_send(
                url="http://localhost:8080/hook",
                headers={"x-order": Event.payload["orderId"]},
                auth={"type": "bearer", "token": Event.payload["token"]},
                body={"by": Steps["order.approved"]["by"]},
            ),
            s.return_(Steps["order.approved"]),
        ]
    )
    assert len(wf.steps) == 5


def test_static_values_that_only_a_run_can_judge_are_left_to_the_run() -> None:
    wf = _define(
        lambda s: [
            s.wait(for_=lambda ctx: ctx.event.payload["delay"]),
            s.wait_for_event("approved", timeout=Event.payload["deadline"], match=lambda ctx: 1),
            s.webhook_send(url=Event.payload["hook"]),
        ]
    )
    assert len(wf.steps) == 3
