"""array_heap: glibc's settings inside the block, and the process's own after it."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

from stateseer.core import heap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")


def test_the_block_sets_the_heap_and_the_last_one_out_restores_it(monkeypatch):
    calls = []

    class Libc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1

        def malloc_trim(self, pad):
            calls.append(("trim", pad))
            return 1

    monkeypatch.setattr(heap, "_libc", Libc())
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")  # as Dask's nanny sets it
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    with heap.array_heap():
        with heap.array_heap():  # nested (or another thread's task): nothing new
            pass
        assert calls == [(heap.M_MMAP_THRESHOLD, 32 << 20), (heap.M_TRIM_THRESHOLD, 256 << 20)]
    assert calls[2:] == [(heap.M_TRIM_THRESHOLD, 65536), (heap.M_MMAP_THRESHOLD, 128 << 10),
                         ("trim", 0)]


def test_the_real_libc_takes_the_settings_and_arrays_come_out_the_same():
    assert isinstance(heap._lib(), ctypes.CDLL)
    with heap.array_heap():
        a = np.arange(10_000_000, dtype=np.float64).sum()
    assert a == np.arange(10_000_000, dtype=np.float64).sum()
