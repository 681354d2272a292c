"""A branch's condition as the graph writes it on its edges: a reference's path, a named
function's call, a lambda's expression (read from its source), a value."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from typing import Any

from .refs import Ref


def condition_text(value: Any) -> str:
    """When a branch takes its true arm, as text: a reference's path, a named
    function's call, a lambda's expression (when its source can be read), a value."""
    if isinstance(value, Ref):
        return value.text
    if callable(value):
        name = getattr(value, "__name__", "")
        if name and name != "<lambda>":
            return f"{name}(ctx)"
        body = _lambda_body(value)
        return body if body and len(body) <= 60 else "a function of ctx"
    return repr(value)


def _lambda_body(fn: Any) -> str | None:
    """The expression of a lambda, from its source line (None: not to be found)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)).strip())
    except (OSError, TypeError, SyntaxError):
        return None
    lambdas = [node for node in ast.walk(tree) if isinstance(node, ast.Lambda)]
    code = getattr(fn, "__code__", None)
    for node in lambdas:
        if len(lambdas) == 1 or (code is not None and _same_code(node, code)):
            return ast.unparse(node.body)
    return None


def _same_code(node: ast.Lambda, code: types.CodeType) -> bool:
    """Whether a lambda of the source compiles to `code` (several on one line)."""
    try:
        compiled = compile(ast.fix_missing_locations(ast.Expression(node)), "<graph>", "eval")
    except (SyntaxError, ValueError):
        return False
    inner = [c for c in compiled.co_consts if isinstance(c, types.CodeType)]
    return bool(inner) and inner[0].co_code == code.co_code
