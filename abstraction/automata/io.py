"""Writing and reading exports: a path (never silently replaced) or an open file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO

from stateseer.abstraction.errors import AbstractionError
from stateseer.core.atomic import atomic_write

__all__ = ["read_text", "write_chunks", "write_output"]


def write_output(data: bytes | str, out: str | Path | IO, *, overwrite: bool = False) -> None:
    """Write ``data`` to an open file, or to a path atomically
    (:func:`stateseer.core.atomic.atomic_write`).

    Raises
    ------
    AbstractionError
        ``out`` is an existing path and ``overwrite`` is False.
    """
    write_chunks([data], out, overwrite=overwrite)


def write_chunks(chunks: Iterable[bytes | str], out: str | Path | IO, *,
                 overwrite: bool = False) -> None:
    """:func:`write_output` of data produced piece by piece (never held whole; text is
    written to a path as UTF-8)."""
    if hasattr(out, "write"):
        for chunk in chunks:
            out.write(chunk)
        return
    p = Path(out)
    if p.exists() and not overwrite:
        raise AbstractionError(f"{p} exists; pass overwrite=True (or --force) to replace it")

    def write(f: IO[bytes]) -> None:
        for chunk in chunks:
            f.write(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8"))

    atomic_write(p, write)


def read_text(source: str | Path | IO[str]) -> str:
    """The text of a path or an open file."""
    return source.read() if hasattr(source, "read") else Path(source).read_text("utf-8")
