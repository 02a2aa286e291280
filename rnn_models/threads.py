"""How many threads torch uses while a block of work runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["torch_threads"]


@contextmanager
def torch_threads(n: int = 1) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)`` and restore the count after.

    One input at a time (the explorer's typed input, attribution and forcing) runs its
    small per-step ops faster on one thread than split across cores: integrated gradients
    of one ~20-token input, p95 121 ms on two threads and 18 ms on one
    (``benchmarks/app_latency.py``). The count is the calling thread's (torch's CPU
    build sets it through OpenMP, per thread), so the requests of a threaded server each
    set their own.

    Parameters
    ----------
    n : int
        Threads for torch's intra-op work in this thread while the block runs.
    """
    import torch

    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
