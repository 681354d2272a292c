"""Stands for your client of the e-signature service. The examples' tests replace the
task that calls it (`env.stub_task`), so nothing here is ever reached in a test."""

from __future__ import annotations


def send(contract_id: str, signers: dict[str, str], idempotency_key: str) -> dict[str, str]:
    raise AssertionError("the examples' tests stub the send task")
