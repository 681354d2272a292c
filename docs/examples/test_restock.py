from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"
WAREHOUSES = [{"warehouse": w} for w in ("north", "south", "east", "west")]


def test_two_reservations_are_enough_and_the_other_warehouses_are_never_asked():
    asked = []

    def warehouse(ctx):
        asked.append(ctx.event.payload["warehouse"])
        return {"warehouse": ctx.event.payload["warehouse"], "rank": ctx.workflow.map_index}

    with WorkflowTestEnv(modules=["restock"]) as env:
        env.stub_task("reservation", warehouse)
        env.put_event(
            tenant=TENANT, type="stock.low", payload={"sku": "s-1", "warehouses": WAREHOUSES}
        )
        env.advance("PT1M")
        run = env.run(tenant=TENANT, workflow="restock", key="s-1")
        assert asked == ["north", "south"]
        assert run.result["reserved"] == {
            "results": [
                {"warehouse": "north", "rank": 0},
                {"warehouse": "south", "rank": 1},
                None,
                None,
            ],
            "failures": [],
            "succeeded": 2,
            "failed": 0,
            "completion": "min_successful_reached",
        }


def test_a_second_refusal_ends_the_map_and_the_run_says_why():
    def warehouse(ctx):
        raise ValueError("out of stock")

    with WorkflowTestEnv(modules=["restock"]) as env:
        env.stub_task("reservation", warehouse)
        env.put_event(
            tenant=TENANT, type="stock.low", payload={"sku": "s-2", "warehouses": WAREHOUSES}
        )
        env.advance("PT1M")
        run = env.run(tenant=TENANT, workflow="restock", key="s-2")
        assert run.result == {"isSuccess": False, "error": "not enough stock"}
        batch = run.steps["reservations"]
        assert [f["index"] for f in batch["failures"]] == [0, 1]
        assert batch["completion"] == "failure_tolerance_exceeded"
        # east and west were never asked: the map stopped at the second refusal.
        assert len(env.runs(tenant=TENANT, workflow="reserve-at-warehouse")) == 2
