from workflow_runner import Event
from workflow_runner.match import all_of, any_of, eq, gte, in_, ne

ours = eq("orderId", Event.payload["orderId"])  # the awaited event's orderId is ours
# A path is dotted, or a list: ["order", "total"].
paid_and_large = all_of(eq("order.status", "paid"), gte("order.total", 100))
vip_or_dach = any_of(in_("country", ["DE", "AT"]), ne("vip", None))
