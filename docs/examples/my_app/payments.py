"""Stands for your client of the payment provider. The examples' tests replace the tasks
that call it (`env.stub_task`), so nothing here is ever reached in a test."""

from __future__ import annotations


class CardDeclined(Exception):
    """The provider refused the card: retrying would not help."""


def charge(order_id: str, idempotency_key: str) -> dict[str, str]:
    raise AssertionError("the examples' tests stub the charge task")


def refund(payment_id: str, idempotency_key: str) -> dict[str, str]:
    raise AssertionError("the examples' tests stub the refund task")
