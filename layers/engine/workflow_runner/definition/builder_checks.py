"""The step builder's checks of arguments several steps share (child workflows,
completion policies, deliveries)."""

from __future__ import annotations

from ..errors import WorkflowDefinitionError
from .completion import Completion
from .retry import RetryPolicy


def _check_child(where: str, name: object, result_key: object, catch: object) -> None:
    if not isinstance(name, str) or not name.strip():
        raise WorkflowDefinitionError(f"{where}: the workflow name must be a non-empty string")
    if result_key is not None and (not isinstance(result_key, str) or not result_key):
        raise WorkflowDefinitionError(f"{where}({name!r}): result_key must be a non-empty string")
    if not isinstance(catch, bool):
        raise WorkflowDefinitionError(f"{where}({name!r}): catch must be True or False")


def _check_completion(where: str, completion: object) -> None:
    if completion is not None and not isinstance(completion, Completion):
        raise WorkflowDefinitionError(
            f"{where}: completion must be a Completion(...), not {type(completion).__name__}"
        )


def _check_delivery(
    where: str, key: object, result_key: object, retry: object, catch: object
) -> None:
    if result_key is not None and (not isinstance(result_key, str) or not result_key):
        raise WorkflowDefinitionError(f"{where}: result_key must be a non-empty string")
    if result_key is not None and key is not None:
        raise WorkflowDefinitionError(
            f"{where}: give key= (fire and forget) or result_key= (wait for the outcome)"
        )
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise WorkflowDefinitionError(f"{where}: retry must be a RetryPolicy")
    if not isinstance(catch, bool):
        raise WorkflowDefinitionError(f"{where}: catch must be True or False")
    if catch and result_key is None:
        raise WorkflowDefinitionError(
            f"{where}: catch=True needs result_key= (a fire-and-forget delivery has no "
            "outcome for the run to catch)"
        )
