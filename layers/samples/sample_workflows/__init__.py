"""The sample workflows: importing this package registers all of them.

Set WORKFLOW_MODULES=sample_workflows (the default) to load them in the functions.
"""

from __future__ import annotations

from .account_sync import account_sync
from .batch_fulfilment import batch_fulfilment, fulfil_order
from .daily_report import daily_report
from .freight_quotes import freight_quotes
from .inventory_sync import inventory_sync
from .order_approval import order_approval
from .shipping_quote import shipping_quote
from .user_onboarding import user_onboarding
from .webhook_delivery import webhook_delivery

__all__ = [
    "account_sync",
    "batch_fulfilment",
    "daily_report",
    "freight_quotes",
    "fulfil_order",
    "inventory_sync",
    "order_approval",
    "shipping_quote",
    "user_onboarding",
    "webhook_delivery",
]
