"""The console links a parent run and its child runs (call_workflow, map)."""

from __future__ import annotations

from console_support import T0, console, send
from workflow_runner.definition import default_registry
from workflow_runner.engine.children import start_children
from workflow_runner.store import Store

from tests.support import TENANT_A


def test_a_parent_page_lists_its_children_and_a_child_page_links_its_parent(
    db_url: str, store: Store
) -> None:
    orders = [{"orderId": f"o-{n}", "email": "c@example.com"} for n in range(7)]
    parent = send(store, "batch.submitted", {"batchId": "b-1", "orders": orders})
    assert start_children(store, default_registry(), T0).started == 5  # concurrency 5
    client = console(db_url)
    page = client.get(f"/runs/{parent}", tenant=TENANT_A)
    assert page.status == 200
    assert "Waiting at step 0 for 7 child run(s) of fulfil-order" in page.text
    table = page.text.split('class="children"')[1]
    assert table.count("/runs/") == 5  # started children only
    child = store.children.of_run(TENANT_A, parent)[0].child_run_id
    child_page = client.get(f"/runs/{child}", tenant=TENANT_A)
    assert "Parent run" in child_page.text
    assert f"/runs/{parent}?tenant={TENANT_A}" in child_page.text
