"""mkdocs hook: the command-line reference (``cli.md``) generated from the argparse
parser itself, so that it cannot drift from ``stateseer --help``."""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- stateseer-cli -->"


def cli_reference() -> str:
    """Markdown: every command's ``--help`` text, in the parser's order."""
    from stateseer.app.cli.main import build_parser

    os.environ.setdefault("COLUMNS", "100")
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = []
    for name, command in sub.choices.items():
        parts.append(f"## `stateseer {name}`\n\n```text\n{command.format_help().strip()}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(MARKER, cli_reference()) if MARKER in markdown else markdown
