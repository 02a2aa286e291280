"""Array helpers shared by the abstraction and the explorer.

``distinct`` exists because numpy 2's plain ``np.unique(a)`` (no ``return_*`` argument)
takes a hash-based path that was about 50x slower than one sort on a million int64 keys
here (1.2-1.4 s against 0.02-0.03 s, numpy 2.4); with ``return_counts`` or
``return_inverse`` it sorts and is fast.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["distinct", "mapped_ranges", "numpy_threads", "will_need"]


def distinct(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a 1-d array, as ``np.unique(a)``, by one sort.

    Examples
    --------
    >>> distinct(np.array([3, 1, 3, 2, 1])).tolist()
    [1, 2, 3]
    """
    a = np.sort(np.asarray(a).reshape(-1))
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if len(a) else a


def numpy_threads(cap: int = 4) -> int:
    """Threads for numpy work: the cores this process may use, at most ``cap`` and at
    most ``$OMP_NUM_THREADS`` when set (a one-core measurement or test stays on one)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        n = min(n or 1, int(os.environ.get("OMP_NUM_THREADS", "") or n or 1))
    except ValueError:
        pass
    return max(1, min(n or 1, cap))


def will_need(a: object, starts: np.ndarray, stops: np.ndarray) -> int:
    """Ask the kernel to read rows ``starts[i]:stops[i]`` of a memory-mapped array ahead,
    all at once (``madvise(MADV_WILLNEED)``), and return the ranges asked for.

    A gather over scattered rows of a file that is not in the page cache otherwise waits
    for one page fault after another, each reading around its page: on a 1M-input run
    (18M steps, float32) a nearest-contexts query read its 1,024 candidates' states in
    about 1.5 s from a cold cache, and in a few milliseconds more than its list scan once
    the reads were asked for together. Arrays that are not memory maps (in memory, or
    where the platform has no ``madvise``) are left alone; a
    :class:`~stateseer.core.traces.ShardedArray` is asked part by part.

    Parameters
    ----------
    a : ndarray, numpy.memmap or ShardedArray
        Rows along the first axis.
    starts, stops : int arrays of equal length
        Row ranges (``stops`` exclusive).
    """
    import mmap

    starts = np.asarray(starts, np.int64).ravel()
    stops = np.asarray(stops, np.int64).ravel()
    parts, bounds = getattr(a, "parts", None), getattr(a, "starts", None)
    if parts is not None and bounds is not None:  # a ShardedArray: each part its rows
        asked = 0
        for k, part in enumerate(parts):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            s, e = np.maximum(starts, lo), np.minimum(stops, hi)
            keep = e > s
            asked += will_need(part, s[keep] - lo, e[keep] - lo)
        return asked
    mm = getattr(a, "_mmap", None)
    if mm is None or not hasattr(mm, "madvise") or not hasattr(mmap, "MADV_WILLNEED") \
            or not len(starts) or getattr(a, "ndim", 0) < 1:
        return 0
    keep = stops > starts  # an empty range (an empty list) asks for nothing
    asked = 0
    for s, e in zip(*(x.tolist() for x in mapped_ranges(a, starts[keep], stops[keep])),
                    strict=True):
        mm.madvise(mmap.MADV_WILLNEED, s, e - s)
        asked += 1
    return asked


def mapped_ranges(a: np.memmap, starts: np.ndarray, stops: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Byte ranges ``[lo, hi)`` in ``a``'s mapping (``a._mmap``, which begins at the
    allocation boundary at or before the array, not at its first byte) of rows
    ``starts[i]:stops[i]``, ``lo`` rounded down to its page: what :func:`will_need` asks
    for."""
    import mmap

    base = np.frombuffer(a._mmap, np.uint8).ctypes.data  # where the mapping begins
    first, row = a.ctypes.data - base, a.strides[0]
    lo = first + np.asarray(starts, np.int64) * row
    return lo - lo % mmap.PAGESIZE, first + np.asarray(stops, np.int64) * row
