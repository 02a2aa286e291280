"""Bounded reads of the files a run or an import directory holds.

Every JSON or text file stateseer reads from a run or an import directory goes through
:func:`read_bounded`: it refuses what is not a regular file (a symlink to ``/dev/zero``
or a FIFO would be read forever) and anything larger than its limit, before reading it;
:func:`load_json` adds a one-line error for JSON nested too deeply for the parser (a
100,000-deep list ends in ``RecursionError``).

Examples
--------
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "x.json"
>>> _ = p.write_text("[" * 100000 + "]" * 100000)
>>> try:
...     load_json(p)
... except DataError as exc:
...     print(str(exc).split(";")[0].endswith("x.json is nested too deeply to read"))
True
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from stateseer.core.errors import DataError

__all__ = ["JSON_LIMIT", "load_json", "read_bounded", "regular_size"]

JSON_LIMIT = 4 << 30
"""The largest JSON or text file read (4 GiB: the token lists of a very large import)."""


def read_bounded(path: str | Path, limit: int = JSON_LIMIT) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises
    ------
    FileNotFoundError
        It does not exist (callers say what to write).
    DataError
        It is not a regular file, or is larger than ``limit`` (one line).
    """
    path = Path(path)
    regular_size(path, limit)
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise DataError(f"{path} holds more than the {limit:,} bytes read; split or shrink it")
    return data


def regular_size(path: str | Path, limit: int | None = None) -> int:
    """The size of the regular file ``path`` (a symbolic link is followed: its target is
    what would be read).

    Raises
    ------
    FileNotFoundError
        It does not exist (callers say what to write).
    DataError
        It is not a regular file (a device, a pipe, a directory), or is larger than
        ``limit`` (one line).
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"{path} is not a regular file (a device, a pipe or a directory); "
                        "point it at a file")
    if limit is not None and st.st_size > limit:
        raise DataError(f"{path} holds {st.st_size:,} bytes, more than the {limit:,} read; "
                        "split or shrink it")
    return st.st_size


def load_json(path: str | Path, limit: int = JSON_LIMIT, *, fix: str = "rewrite it") -> Any:
    """``json.loads`` of :func:`read_bounded` (UTF-8); ``fix`` ends the message of a file
    that is not JSON (what the user should do: the step that writes it).

    Raises
    ------
    FileNotFoundError
    DataError
        Not a regular file, too large, not UTF-8 JSON, or nested too deeply (one line).
    """
    data = read_bounded(path, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise DataError(f"{path} is nested too deeply to read; write flat JSON "
                        "(lists of lists of strings at most)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{path} is not valid UTF-8 JSON ({str(exc)[:80]}); {fix}"
                        ) from None
