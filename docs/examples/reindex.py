from workflow_runner import Debounce, Event, define_workflow, on_event

# Reindex a document once its edits stop: 2 minutes after the last edit, with that
# edit's event, and at most 10 minutes after the first.
reindex = define_workflow(
    name="reindex",
    trigger=on_event("doc.edited"),
    debounce=Debounce("PT2M", key=Event.payload["docId"], timeout="PT10M"),
    steps=lambda s: [s.return_({"version": Event.payload["version"]})],
)
