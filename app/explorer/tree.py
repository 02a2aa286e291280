"""Walking a Dash component tree: the one definition of a component's children.

The registry checks what each view places, study mode hides and blanks what a condition
leaves out; all of them walk the layout the same way.

>>> from dash import html
>>> page = html.Div([html.P("text", id="p"), "a string", html.Span(id="s")], id="root")
>>> [c.id for c in walk(page)]
['root', 'p', 's']
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["children", "is_component", "walk"]


def is_component(x: Any) -> bool:
    return hasattr(x, "to_plotly_json")


def children(c: Any) -> list[Any]:
    """The components directly under ``c`` (strings and numbers among its children are
    content, not components)."""
    kids = getattr(c, "children", None)
    if kids is None:
        return []
    return [k for k in (kids if isinstance(kids, (list, tuple)) else [kids])
            if is_component(k)]


def walk(c: Any) -> Iterator[Any]:
    """``c`` (when a component) and every component under it, depth first."""
    if is_component(c):
        yield c
    for k in children(c):
        yield from walk(k)
