"""The ``stateseer`` command line: a thin layer over :mod:`stateseer.app.workflows` and the engine.

Every command takes a run directory (see :mod:`stateseer.rnn_models.run`). Choices come from the
registries of the packages that implement them (architectures, abstractors, export
writers, data sets), read only when a command needs them, so ``stateseer --help`` imports
nothing heavy. Errors in the user's input — bad option values included — are printed as
one line (``stateseer: error: ...``) with exit status 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import unicodedata
import warnings
from collections.abc import Sequence
from typing import Any

from stateseer.app.cli.abstraction import (
    _add_abstract,
    _add_dfa_export,
    _add_force_compare_index,
    _add_sweep,
)
from stateseer.app.cli.diagnosis import _add_diagnose
from stateseer.app.cli.models import _add_colors_command, _add_create, _add_record, _add_train
from stateseer.app.cli.serving import _add_serving
from stateseer.app.cli.study import _add_study
from stateseer.core.errors import StateseerError

__all__ = ["build_parser", "main"]


# -- the parser: one small function per command -------------------------------------------
class _HelpFormatter(argparse.HelpFormatter):
    """Shows every option's default (when it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("%(default)" in text or not action.option_strings or action.default is None
                or action.default is False or action.default is argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line that points at ``--help``; every help shows defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"stateseer: error: {printable(message)} (see `{self.prog} --help`)\n")


COMMANDS = (_add_train, _add_create, _add_colors_command, _add_record, _add_abstract, _add_sweep,
            _add_force_compare_index, _add_diagnose, _add_dfa_export, _add_serving,
            _add_study)


def build_parser() -> argparse.ArgumentParser:
    """The ``stateseer`` argument parser (one sub-parser per command)."""
    p = _Parser(prog="stateseer",
                description="Explain recurrent text classifiers by state abstraction.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return p


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, with arguments a command does not take refused by that
    command's parser, so the message points at ``stateseer COMMAND --help``."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        subs = next((a.choices for a in parser._actions
                     if isinstance(a, argparse._SubParsersAction)), {})
        (subs.get(getattr(args, "command", None)) or parser).error(
            f"unrecognized arguments: {' '.join(extra)}")
    return args


def _unexpected(command: str, exc: Exception) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return (f"`stateseer {command}` stopped on unexpected input ({type(exc).__name__}"
            f"{': ' + first if first else ''}); a file it read may be damaged — re-run the "
            "step that wrote it (STATESEER_TRACEBACK=1 shows where)")


def printable(text: str) -> str:
    """``text`` with its control characters written as escapes: what a user's input
    carries (a terminal colour code in a file name, a newline in a column name) cannot
    colour, move or split the one line an error is.

    >>> printable("no column 'x\\x1b[31m' here\\nreally")
    "no column 'x\\\\x1b[31m' here\\\\nreally"
    """
    return "".join(ch if unicodedata.category(ch) != "Cc" else
                   ch.encode("unicode_escape").decode("ascii") for ch in text)


def _one_line_warning(message: Warning | str, category: type[Warning], *_: Any,
                      **__: Any) -> str:
    return f"stateseer: warning: {printable(str(message))}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for any error in the input)."""
    previous = warnings.formatwarning
    warnings.formatwarning = _one_line_warning  # type: ignore[assignment]
    try:
        args = _parse(build_parser(), argv)
    except SystemExit as exc:  # --help, or a one-line usage error
        warnings.formatwarning = previous  # type: ignore[assignment]
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if hasattr(args, "cluster"):  # every command that takes --cluster: refused alike
            from stateseer.core.engine import check_cluster

            check_cluster(args.cluster)
        return int(args.func(args) or 0)
    except StateseerError as exc:
        print(f"stateseer: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stateseer: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a loader that did not wrap its failure: still one line
        if os.environ.get("STATESEER_TRACEBACK"):
            raise
        print(f"stateseer: error: {printable(_unexpected(args.command, exc))}",
              file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = previous  # type: ignore[assignment]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
