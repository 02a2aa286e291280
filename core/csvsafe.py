"""CSV cells that a spreadsheet will not run as formulas (OWASP "CSV injection").

A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by
Excel, LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` can leak data or
run a command). Following OWASP, such a text cell gets a leading single quote, which
spreadsheets show as text; numbers are left as they are. Every CSV that stateseer writes
goes through :func:`escape_cell` (the traces CSV export, the study's exports and admin
downloads, the explorer's table download); data sets that stateseer writes to read back
(a repair's edited training data, the injected-bug benchmark's) are JSON lines, which no
spreadsheet runs.

Examples
--------
>>> escape_cell("=HYPERLINK(\\"http://x\\")"), escape_cell("@SUM(A1)"), escape_cell("ok")
('\\'=HYPERLINK("http://x")', "'@SUM(A1)", 'ok')
>>> escape_cell(-3), escape_cell("-3")
(-3, "'-3")
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["FORMULA_PREFIXES", "escape_cell", "escape_row", "rows_to_csv"]

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def escape_cell(value: Any) -> Any:
    """``value`` with a leading ``'`` if it is text a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def escape_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A CSV row (a mapping) with every cell escaped."""
    return {k: escape_cell(v) for k, v in row.items()}


def rows_to_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Rows as CSV text with a header, every cell escaped, quoted where needed."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore")
    w.writeheader()
    w.writerows(escape_row(r) for r in rows)
    return buf.getvalue()
