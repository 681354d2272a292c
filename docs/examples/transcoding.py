from workflow_runner import Event, StepContext, define_workflow, on_event


def job(ctx: StepContext) -> dict[str, str]:
    # The transcoder POSTs the rendition to `callback` when it is done, POSTs to
    # `callback` + "/heartbeat" while it works, and to `callback` + "/fail" with
    # {"error": ..., "message": ...} when it gives up.
    return {"videoId": ctx.event.payload["videoId"], "callback": str(ctx.callback.url)}


def outcome(ctx: StepContext) -> dict[str, object]:
    rendition = ctx.steps["rendition"]
    if rendition is None:  # no answer: six hours passed, or five minutes without a beat
        return {"isSuccess": False, "error": "transcoder did not answer"}
    if rendition.get("failed"):  # the transcoder reported a failure (caught)
        return {"isSuccess": False, "error": rendition["error"]}
    return {"isSuccess": True, "url": rendition["url"]}


transcoding = define_workflow(
    name="transcoding",
    trigger=on_event("video.uploaded"),
    idempotency_key=Event.payload["videoId"],
    steps=lambda s: [
        s.webhook_send(url="https://transcoder.example.com/jobs", body=job),
        s.wait_for_callback("rendition", timeout="PT6H", heartbeat="PT5M", catch=True),
        s.return_(outcome),
    ],
)
