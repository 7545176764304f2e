"""Is a surviving mutant cosmetic? Decided on the Python AST of the original and mutated function:
only string constants that no computation reads back (an error message, a validator's parameter
name, an event label, an assumption's wording) may differ; nothing under ``metadata=`` is text."""

from __future__ import annotations

import ast

# Calls whose string arguments only feed a message (validators name the parameter in their error).
_MESSAGE_CALLS = ("check_", "_check", "resolve_log_delta", "warn", "warning", "info", "debug", "error")
# Keyword arguments / parameters that are text only (never read by a computation). NOT metadata:
# an event's metadata is read back (privacy_cost_of_chains recomputes mu and eps from it; issue 30).
_TEXT_KEYWORDS = {"label", "assumptions", "extra_assumptions", "name"}


def function_defs(tree: ast.AST) -> dict[str, ast.AST]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _ast_diffs(a, b, path=()):
    """Pairs (ancestor path, node_a, node_b) where the two trees differ (names of defs ignored)."""
    if type(a) is not type(b):
        return [(path, a, b)]
    if isinstance(a, ast.AST):
        out = []
        for f in a._fields:
            if f == "name" and isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            out += _ast_diffs(getattr(a, f, None), getattr(b, f, None), path + ((a, f),))
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [(path, a, b)]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += _ast_diffs(x, y, path + ((a, i),))
        return out
    return [] if a == b else [(path, a, b)]


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")


def _text_context(path) -> bool:
    """True if the node at the end of ``path`` sits where only a message / label / metadata is built."""
    for i, (node, field) in enumerate(path):
        if isinstance(node, (ast.Raise, ast.JoinedStr)):
            return True
        if isinstance(node, ast.keyword) and node.arg in _TEXT_KEYWORDS:
            return True
        if isinstance(node, ast.Call) and field == "args" and _call_name(node).startswith(_MESSAGE_CALLS):
            return True
        if isinstance(node, ast.arguments) and field in ("defaults", "kw_defaults"):
            # default value of a text parameter (e.g. label="gibbs_pure_draw")
            idx = path[i + 1][1] if i + 1 < len(path) else None
            params = node.args[len(node.args) - len(node.defaults):] if field == "defaults" else node.kwonlyargs
            if isinstance(idx, int) and idx < len(params) and params[idx].arg in _TEXT_KEYWORDS:
                return True
    return False


_FREE_KEYWORDS = {"label"}  # whole value free to change: a label is text nothing reads back


def _under_free_keyword(path) -> bool:
    return any(isinstance(node, ast.keyword) and node.arg in _FREE_KEYWORDS for node, _ in path)


def _dropped_free_keywords(a, b) -> bool:
    """``b`` is the keyword list ``a`` minus some label= arguments."""
    if not (isinstance(a, list) and isinstance(b, list) and all(isinstance(k, ast.keyword) for k in a + b)):
        return False
    kept = [ast.dump(k) for k in b]
    dropped = [k for k in a if ast.dump(k) not in kept]
    return len(a) - len(b) == len(dropped) and all(k.arg in _FREE_KEYWORDS for k in dropped)


def _is_text(x) -> bool:
    return isinstance(x, str) or (isinstance(x, ast.Constant) and isinstance(x.value, str))


def _is_text_or_none(x) -> bool:
    return _is_text(x) or x is None or (isinstance(x, ast.Constant) and x.value is None)


def cosmetic(orig_src: str, mutant_src: str) -> bool:
    """The mutant differs from the original only in text that no computation reads.

    Every difference must be either a string constant (replaced by another string or None) in a
    message context (raise, f-string, a validator's parameter name, a label / assumption text
    argument or default), or a change of a ``label=`` argument (dropped or replaced). Dropping
    ``assumptions=`` is NOT cosmetic (an event must state its assumptions), and nothing under
    ``metadata=`` is: computations read it back (``privacy_cost_of_chains``).
    """
    diffs = _ast_diffs(ast.parse(orig_src), ast.parse(mutant_src))
    if not diffs:
        return True
    for path, a, b in diffs:
        if _under_free_keyword(path) or _dropped_free_keywords(a, b):
            continue
        if _is_text(a) and _is_text_or_none(b) and _text_context(path):
            continue
        return False
    return True
