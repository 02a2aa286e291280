"""How result objects show themselves in a notebook (``_repr_html_``): a small table of
figures, every value escaped (pure strings; no notebook package needed)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

__all__ = ["figure", "figures_html"]

STYLE = ("<style>.stateseer-figs{font:13px sans-serif;border-collapse:collapse}"
         ".stateseer-figs td,.stateseer-figs th{padding:2px 10px 2px 0;text-align:left;"
         "border-bottom:1px solid #eee}.stateseer-figs th{font-weight:600}</style>")


def figure(x: Any, digits: int = 3) -> str:
    """A metric as shown: numbers rounded, the rest as text ("—" for none).

    Examples
    --------
    >>> figure(0.91484), figure(None), figure(40)
    ('0.915', '—', '40')
    """
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def figures_html(title: str, rows: Sequence[tuple[str, Any]], extra: str = "") -> str:
    """A titled two-column table (name, value), then ``extra`` (trusted HTML).

    Examples
    --------
    >>> "&lt;b&gt;" in figures_html("<b>", [("a", 1)])
    True
    """
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(figure(v))}</td></tr>"
                   for k, v in rows)
    return (f"{STYLE}<div class='stateseer-figs-box'><b style='font:14px sans-serif'>"
            f"{html.escape(title)}</b><table class='stateseer-figs'>{body}</table>"
            f"{extra}</div>")
