"""glibc's heap, tuned for large temporary arrays while a block of work runs."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["array_heap", "trim"]

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's upper limit on 64-bit systems
_lock = threading.Lock()
_depth = 0
_libc: object = None


def _lib():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL("libc.so.6") if sys.platform.startswith("linux") else False
        except OSError:
            _libc = False
    return _libc or None


def _env(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else default


@contextmanager
def array_heap() -> Iterator[None]:
    """While the block runs, glibc serves arrays up to 32 MB from its heap and keeps freed
    heap memory up to 256 MB, instead of mapping and unmapping every array over 128 kB;
    after the last overlapping block the process's own settings (``MALLOC_*`` variables,
    else glibc's defaults) come back and the heap is trimmed. No effect off glibc.

    Dask's nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which, like any
    explicit setting, turns glibc's adaptive mmap threshold off: each temporary array of a
    shard's probabilistic simulation was then a fresh mapping, page faults included, and
    the simulation ran 2.1x slower on a worker than in this block (2.14 vs 1.04 s, the
    same numbers out).
    """
    global _depth
    lib = _lib()
    if lib is None:
        yield
        return
    with _lock:
        if _depth == 0:
            lib.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
            lib.mallopt(M_TRIM_THRESHOLD, 256 << 20)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                lib.mallopt(M_TRIM_THRESHOLD, _env("MALLOC_TRIM_THRESHOLD_", 128 << 10))
                lib.mallopt(M_MMAP_THRESHOLD, _env("MALLOC_MMAP_THRESHOLD_", 128 << 10))
                lib.malloc_trim(0)


def trim() -> None:
    """Give the heap's free memory back to the system (glibc's ``malloc_trim``; no effect
    elsewhere). A server's threads each take a malloc arena, and large requests leave
    them holding freed memory that a plain ``free`` keeps."""
    lib = _lib()
    if lib is not None:
        lib.malloc_trim(0)
