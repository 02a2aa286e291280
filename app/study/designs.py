"""Within-subject orders: Williams designs (Latin squares balanced for carry-over).

A within-subject study shows every participant every condition, one block after the
other; the order must not favour a condition. A *Williams design* is a set of orders
(rows) in which every condition takes every position equally often and every condition
immediately follows every other one equally often (first-order carry-over balanced):
``n`` rows for an even number of conditions, ``2 n`` (the square and its mirror) for an
odd one. Participant ``k`` takes row ``k mod len(rows)``, so any multiple of the number of
rows is balanced exactly.

Task sets go with positions, not conditions: block ``p`` of every participant shows task
set ``p``, so nobody sees an instance twice and, since the conditions rotate over the
positions, every condition meets every task set equally often.

Examples
--------
>>> williams(4)
[[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
>>> len(williams(3))
6
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["schedule", "williams"]


def williams(n: int) -> list[list[int]]:
    """The rows of a Williams design for ``n`` conditions (numbered ``0 .. n-1``).

    The first row interleaves from both ends (``0, 1, n-1, 2, n-2, ...``); row ``i`` adds
    ``i`` to it modulo ``n``. For an odd ``n`` the mirrored rows are appended, since no
    single square balances carry-over then.

    Raises
    ------
    ValueError
        ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"a design needs at least one condition, got {n}")
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(c + i) % n for c in first] for i in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return rows


def schedule(k: int, conditions: Sequence[str], task_sets: Sequence[str] | None = None
             ) -> list[tuple[str, str | None]]:
    """Participant ``k``'s blocks: ``[(condition, task set), ...]`` in the order shown.

    Parameters
    ----------
    k : int
        The participant's arrival number (0-based).
    conditions : sequence of str
    task_sets : sequence of str, optional
        One per block, in position order (as many as conditions).

    Examples
    --------
    >>> schedule(1, ["full", "baseline"], ["set-a", "set-b"])
    [('baseline', 'set-a'), ('full', 'set-b')]
    """
    if task_sets is not None and len(task_sets) != len(conditions):
        raise ValueError(f"{len(conditions)} conditions need {len(conditions)} task sets "
                         f"(one per block), got {len(task_sets)}")
    rows = williams(len(conditions))
    row = rows[k % len(rows)]
    return [(conditions[c], task_sets[p] if task_sets is not None else None)
            for p, c in enumerate(row)]
