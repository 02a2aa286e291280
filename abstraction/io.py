"""Writing and reading exports: a path (never silently replaced) or an open file."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from .errors import AbstractionError

__all__ = ["read_text", "write_output"]


def write_output(data: bytes | str, out: str | Path | IO, *, overwrite: bool = False) -> None:
    """Write ``data`` to an open file, or to a path through a temporary file and a rename.

    Raises
    ------
    AbstractionError
        ``out`` is an existing path and ``overwrite`` is False.
    """
    if hasattr(out, "write"):
        out.write(data)
        return
    p = Path(out)
    if p.exists() and not overwrite:
        raise AbstractionError(f"{p} exists; pass overwrite=True (or --force) to replace it")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data, encoding="utf-8")
    tmp.replace(p)


def read_text(source: str | Path | IO[str]) -> str:
    """The text of a path or an open file."""
    return source.read() if hasattr(source, "read") else Path(source).read_text("utf-8")
