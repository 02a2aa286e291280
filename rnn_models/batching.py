"""Length-bucketed batches of padded token ids."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["length_batches", "pad_batch"]


def length_batches(
    lengths: np.ndarray,
    batch_size: int = 64,
    *,
    max_tokens: int | None = None,
    rng: np.random.Generator | None = None,
) -> list[np.ndarray]:
    """Split indices into batches of similar length (little padding).

    Parameters
    ----------
    lengths : ndarray of shape (n,)
    batch_size : int
        Most inputs in a batch.
    max_tokens : int, optional
        Also cap ``len(batch) * max_length`` so long inputs get smaller batches.
    rng : Generator, optional
        If given, ties are broken at random and the batch order is shuffled (training).

    Returns
    -------
    list of ndarray of int64
        Indices into ``lengths``; every index appears exactly once.
    """
    lengths = np.asarray(lengths)
    if rng is None:
        order = np.argsort(lengths, kind="stable")
    else:
        order = np.lexsort((rng.random(len(lengths)), lengths))
    batches: list[np.ndarray] = []
    start, n = 0, len(order)
    while start < n:
        stop = min(start + batch_size, n)
        if max_tokens is not None:
            longest = max(int(lengths[order[stop - 1]]), 1)
            stop = min(stop, start + max(1, max_tokens // longest))
        batches.append(order[start:stop].astype(np.int64))
        start = stop
    if rng is not None:
        rng.shuffle(batches)
    return batches


def pad_batch(seqs: Sequence[np.ndarray], idx: np.ndarray, pad: int = 0):
    """Right-pad ``seqs[i] for i in idx`` into an int64 array (B, T) and lengths (B,)."""
    lengths = np.fromiter((len(seqs[i]) for i in idx), dtype=np.int64, count=len(idx))
    out = np.full((len(idx), int(lengths.max(initial=0))), pad, dtype=np.int64)
    if out.size:
        mask = np.arange(out.shape[1]) < lengths[:, None]
        out[mask] = np.concatenate([seqs[i] for i in idx])
    return out, lengths
