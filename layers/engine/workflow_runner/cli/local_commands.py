"""Local runtime commands: `wfr local put-events | tick | clock | mail | sink` and
`wfr demo`."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..definition import WorkflowRegistry, load_workflow_modules
from ..durations import format_instant
from ..envelope import parse_envelope, to_domain_event
from ..errors import InvalidInput
from ..json_input import MAX_DEPTH, parse_json
from ..local import routes as r
from ..local.application import find_template, no_template_message, packaged_template
from ..local.demo import run_demo
from ..local.runtime import Activity, LocalRuntime, to_eventbridge_event
from ..local.sink import ReceivedRequest, parse_answers, webhook_sink
from ..settings import Settings
from ..store import CapturedMail, Store, connect
from ..suggest import did_you_mean
from ..timeline import activity_rows, instant, log_json, shown_payload
from .console_command import database_label, serve_console
from .context import Context, UsageError, parse_duration_arg, parse_now
from .render import Output


def _template(ctx: Context) -> Path:
    given = getattr(ctx.args, "template", None)
    if given:
        path = Path(given)
        if not path.is_file():
            raise UsageError(f"--template {given}: no such file")
        return path
    found = find_template()
    if found is None:
        raise UsageError(no_template_message() + " (--template FILE)")
    if found == packaged_template():
        print(
            f"wfr: note: no template.yaml here or above: the application packaged with the "
            f"engine ({found})",
            file=ctx.output.err,
        )
    return found


def read_entries(source: str, stdin: Any = None) -> list[dict[str, Any]]:
    """The events of a put-events file: a list of entries or events, {"Entries": [...]},
    or one entry or event.

    Raises:
        InvalidInput: the file is missing, not JSON of one of those shapes, or nested
            deeper than its events may be.
    """
    try:
        text = (stdin or sys.stdin).read() if source == "-" else Path(source).read_text()
    except OSError as error:
        raise UsageError(f"cannot read {source}: {error.strerror or error}") from None
    try:
        # The file's own levels (a list, in an {"Entries": ...} object) come on top of
        # its events' MAX_DEPTH, which parse_envelope holds each event to. Its size is
        # the developer's own; each event in it is held to MAX_EVENT_BYTES.
        data = parse_json(text, source, max_bytes=None, max_depth=MAX_DEPTH + 2)
    except InvalidInput as error:
        raise UsageError(str(error)) from None
    if isinstance(data, dict) and isinstance(data.get("Entries"), list):
        data = data["Entries"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise UsageError(f"{source}: expected a non-empty list of put-events entries or events")
    return data


def prepare_events(
    entries: Sequence[Any], now: datetime, tenant_path: str, source: str
) -> list[dict[str, Any]]:
    """Full EventBridge events, each validated the way the functions will validate it,
    so a bad entry stops the whole file before anything is sent.

    Raises:
        InvalidInput: entries are malformed; the message names every one (1-based).
    """
    events = []
    problems = []
    for number, entry in enumerate(entries, start=1):
        try:
            event = to_eventbridge_event(entry, now)
            to_domain_event(parse_envelope(event), tenant_path)
        except InvalidInput as error:
            problems.append(f"{source}: entry {number}: {error}")
            continue
        events.append(event)
    if problems:
        count = (
            f"{len(problems)} of {len(entries)} entries are" if len(entries) > 1 else "the entry is"
        )
        raise UsageError(f"{count} invalid; nothing was sent:\n" + "\n".join(problems))
    return events


def unused_types(events: Sequence[dict[str, Any]], registry: WorkflowRegistry) -> list[str]:
    """A warning per event whose detail-type no registered workflow starts on or waits
    for (the functions will ignore it), with the closest names as a hint."""
    known = sorted(registry.trigger_types() | registry.cancel_types() | registry.awaited_types())
    warnings = []
    for number, event in enumerate(events, start=1):
        kind = str(event.get("detail-type"))
        if kind in known:
            continue
        hint = did_you_mean(kind, known, n=2)
        warnings.append(
            f"entry {number}: no workflow is triggered by or waits for {kind!r}, so it will "
            f"be ignored{hint}"
        )
    return warnings


def _move_clock(ctx: Context, runtime_now: datetime | None, target: datetime) -> None:
    if runtime_now is not None and target < runtime_now:
        raise UsageError(
            f"--now {instant(target)} is before the local clock ({instant(runtime_now)}): "
            "local time only moves forward"
        )


def activity_json(activity: Activity) -> dict[str, Any]:
    return {
        "now": activity.now,
        "functions": [{"function": name, "response": answer} for name, answer in activity.answers],
        "events": [
            {
                "tenantId": e.tenant_id,
                "streamId": e.stream_id,
                "streamType": e.stream_type,
                "version": e.version,
                "type": e.type,
                "payload": shown_payload(e),
                "recordedAt": e.recorded_at,
            }
            for e in activity.events
        ],
        "mail": [mail_json(m) for m in activity.mail],
        "log": [log_json(line) for line in activity.log],
    }


def mail_json(mail: CapturedMail) -> dict[str, Any]:
    return {
        "requestId": mail.request_id,
        "from": mail.sender,
        "to": mail.recipients,
        "subject": mail.subject,
        "body": mail.body,
        "sentAt": mail.sent_at,
    }


def print_activity(out: Output, store: Store, activity: Activity) -> None:
    rows = activity_rows(store, activity.events)
    if rows:
        out.table(["TIME", "RUN", "WORKFLOW", "EVENT", "DETAIL"], rows)
    for m in activity.mail:
        out.line(out.paint("  mail ", "cyan") + f"to {', '.join(m.recipients)}: {m.subject}")
    for line in activity.log:
        out.line(out.paint("  error ", "red") + f"run {line.run_id[:8]}: {line.text}")


def _answer_summary(store: Store, tenant_id: str, folder: str, answer: Any) -> str:
    if not isinstance(answer, dict):
        return folder
    if answer.get("ignored"):
        return f"{folder}: ignored ({answer.get('reason')})"
    if folder == r.TRIGGER_PROJECTION:
        started = answer.get("started") or []
        if not answer.get("stored", True):
            return f"{folder}: already received (redelivery), nothing started"
        # What the trigger did not start, and why: the run of its key exists already
        # (a repeated sign-up), or the workflow's filter said no.
        why = [_existing_run(store, tenant_id, e) for e in answer.get("existing") or []]
        why += [f"{name}'s trigger filter said no" for name in answer.get("filtered") or []]
        if not started:
            return f"{folder}: started nothing" + (f": {'; '.join(why)}" if why else "")
        return (
            f"{folder}: started "
            + ", ".join(f"{s['workflow']} {s['runId']} ({s['outcome']})" for s in started)
            + (f"; {'; '.join(why)}" if why else "")
        )
    if folder == r.EVENT_WAKEUP:
        woken = answer.get("woken") or []
        if not woken:
            return f"{folder}: woke no waiting run"
        return f"{folder}: woke " + ", ".join(
            f"{w['runId']} at step {w['stepIndex']}" for w in woken
        )
    return folder


def _existing_run(store: Store, tenant_id: str, existing: dict[str, Any]) -> str:
    """`user-onboarding run 1434… already exists for idempotency key 'ada' (waiting)`."""
    summary = store.runs.get(tenant_id, existing["runId"])
    status = f" ({summary.status})" if summary is not None else ""
    key = existing.get("key")
    of_key = f" for idempotency key {key!r}" if key is not None else ""
    return f"{existing['workflow']} run {existing['runId']} already exists{of_key}{status}"


def cmd_put_events(ctx: Context) -> int:
    """Send events through the template's routes and run everything that follows."""
    target = parse_now(ctx.args.now, "--now") if ctx.args.now else None
    template = _template(ctx)
    entries = read_entries(ctx.args.file)
    store = ctx.store()
    current = store.local.clock()
    if target is not None:
        _move_clock(ctx, current, target)
    tenant_path = Settings.model_fields["tenant_id_path"].default
    events = prepare_events(entries, target or current or ctx.now(), tenant_path, ctx.args.file)
    for warning in unused_types(events, ctx.registry()):
        ctx.output.warn(warning)
    runtime = LocalRuntime(
        store,
        ctx.registry(),
        template,
        start=target or current,
        environ=ctx.environ,
        kept=ctx.kept_code(local=True),
    )
    if target is not None:
        runtime.set_now(target)
    results = []
    for event in events:
        targets = runtime.routing.targets(event)
        activity = runtime.put_event(event)
        results.append((event, targets, activity))
    out = ctx.output
    if out.as_json:
        out.json(
            {
                "now": runtime.now(),
                "events": [
                    {
                        "id": event["id"],
                        "detailType": event["detail-type"],
                        "routedTo": targets,
                        **activity_json(activity),
                    }
                    for event, targets, activity in results
                ],
            }
        )
        return 0
    out.line(out.paint(f"local time {instant(runtime.now())}", "dim"))
    for event, targets, activity in results:
        out.heading(f"event {event['id']}  {event['detail-type']}")
        if not targets:
            out.line("  routed to no function (no rule of the template matches it)")
        tenant_id = to_domain_event(parse_envelope(event), tenant_path).tenant_id
        for folder, answer in activity.answers:
            if folder in (r.TRIGGER_PROJECTION, r.EVENT_WAKEUP):
                out.line("  " + _answer_summary(store, tenant_id, folder, answer))
        print_activity(out, store, activity)
    return 0


def cmd_tick(ctx: Context) -> int:
    """One scheduled cycle, or a series of them to fast-forward."""
    target = parse_now(ctx.args.now, "--now") if ctx.args.now else None
    until = parse_now(ctx.args.until, "--until") if ctx.args.until else None
    if (until is None) != (ctx.args.every is None):
        raise UsageError("--until and --every go together")
    every: timedelta | None = None
    if ctx.args.every is not None:
        every = parse_duration_arg(ctx.args.every, "--every")
        if every <= timedelta(0):
            raise UsageError("--every must be longer than zero")
    template = _template(ctx)
    store = ctx.store()
    current = store.local.clock()
    if target is not None:
        _move_clock(ctx, current, target)
    start = target or current or ctx.now()
    if until is not None and until < start:
        raise UsageError(f"--until {instant(until)} is before the local clock ({instant(start)})")
    assert every is None or until is not None
    if until is not None and every is not None and (until - start) / every > 100_000:
        raise UsageError("--until/--every would run more than 100000 cycles; use a longer --every")
    runtime = LocalRuntime(
        store, ctx.registry(), template, start=start, environ=ctx.environ, kept=ctx.kept_code(True)
    )
    runtime.set_now(start)
    out = ctx.output
    if until is None or every is None:
        cycles = [runtime.tick()]
    else:
        cycles = []
        for activity in runtime.travel(until, every):
            cycles.append(activity)
            if not out.as_json:
                out.progress(f"tick {len(cycles)} at {instant(activity.now)}")
        if not out.as_json:
            out.progress(f"{len(cycles)} ticks up to {instant(runtime.now())}", final=True)
    for activity in cycles:
        if not out.as_json and (activity.events or activity.mail):
            out.heading(f"── {instant(activity.now)}")
            print_activity(out, store, activity)
    if out.as_json:
        out.json({"now": runtime.now(), "cycles": [activity_json(a) for a in cycles]})
    elif not any(a.events or a.mail for a in cycles):
        out.line(f"local time {instant(runtime.now())}: nothing was due")
    else:
        out.line(out.paint(f"local time {instant(runtime.now())}", "dim"))
    return 0


def cmd_clock(ctx: Context) -> int:
    """The local clock and the queued resume requests."""
    store = ctx.store()
    now = store.local.clock()
    queued = store.local.queued()
    out = ctx.output
    if out.as_json:
        out.json(
            {
                "now": now,
                "queue": [
                    {
                        "tenantId": q.tenant_id,
                        "runId": q.run_id,
                        "stepIndex": q.step_index,
                        "visibleAt": q.visible_at,
                    }
                    for q in queued
                ],
            }
        )
        return 0
    out.line(f"local time {instant(now)}" if now else "no local clock yet (run `wfr local tick`)")
    out.table(
        ["RUN ID", "STEP", "VISIBLE AT"],
        [[q.run_id, q.step_index, instant(q.visible_at)] for q in queued],
        empty="resume queue empty",
    )
    return 0


def cmd_mail(ctx: Context) -> int:
    """The mail the local step dispatcher captured, bodies included (the callback links
    and tokens a workflow handed out are in them)."""
    rows = ctx.store().local.mail()
    if ctx.args.to:
        rows = [m for m in rows if ctx.args.to.lower() in (r.lower() for r in m.recipients)]
    if ctx.args.last is not None:
        if ctx.args.last < 1:
            raise UsageError("--last must be at least 1")
        rows = rows[-ctx.args.last :]
    out = ctx.output
    if out.as_json:
        out.json([mail_json(m) for m in rows])
        return 0
    if not rows:
        out.line("no mail captured" + (f" to {ctx.args.to}" if ctx.args.to else ""))
    for number, m in enumerate(rows):
        if number:
            out.line("")
        out.heading(f"── {instant(m.sent_at)}  {m.subject}")
        out.line(f"From: {m.sender}")
        out.line(f"To: {', '.join(m.recipients)}")
        out.line(f"Subject: {m.subject}")
        out.line(out.paint(f"Request: {m.request_id}", "dim"))
        out.line("")
        for line in m.body.splitlines() or [""]:
            out.line(f"  {line}")
    return 0


def cmd_sink(ctx: Context) -> int:
    """Answer webhooks on this machine and print each as it arrives, until Ctrl-C."""
    answers = parse_answers(ctx.args.answer)
    out = ctx.output

    def show(request: ReceivedRequest) -> None:
        if out.as_json:
            line = json.dumps(
                {
                    "receivedAt": format_instant(request.received_at),
                    "method": request.method,
                    "path": request.path,
                    "status": request.status,
                    "idempotencyKey": request.idempotency_key,
                    "headers": request.headers,
                    "body": request.body,
                },
                ensure_ascii=False,
            )
        else:
            body = json.dumps(request.body, ensure_ascii=False)
            key = request.idempotency_key or "-"
            line = (
                f"{request.method} {request.path}  {request.status}  idempotency-key {key}  {body}"
            )
        out.line(line)
        out.out.flush()

    try:
        with webhook_sink(answers, ctx.args.host, ctx.args.port, show) as sink:
            print(
                f"wfr local sink: listening on {sink.url} (Ctrl-C stops it); send a host's "
                f"webhooks here with\n  export WFR_WEBHOOK_REDIRECTS=hooks.example.com={sink.url}",
                file=out.err,
                flush=True,
            )
            sink.thread.join()
    except OSError as error:
        raise UsageError(
            f"cannot listen on {ctx.args.host}:{ctx.args.port}: {error.strerror or error}"
        ) from None
    except KeyboardInterrupt:
        pass
    return 0


def cmd_demo(ctx: Context) -> int:
    """Play the sample workflows end to end (then serve the console on its database)."""
    then = None
    if ctx.args.console:

        def then(url: str) -> object:
            store = connect(url)
            try:
                label = database_label(store.dsn)
            finally:
                store.close()
            registry = load_workflow_modules({"WORKFLOW_MODULES": "sample_workflows"})
            # The demo's database is thrown away afterwards: actions are safe to try.
            return serve_console(
                ctx.output, url, label, registry, "127.0.0.1", ctx.args.port, True, None
            )

    return run_demo(ctx.output, ctx.environ, getattr(ctx.args, "database_url", None), then)
