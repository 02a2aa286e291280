"""Array helpers: reads of a memory map asked for ahead."""

from __future__ import annotations

import mmap

import numpy as np

from stateseer.abstraction.analysis.neighbors import mapped_member
from stateseer.abstraction.arrays import mapped_ranges, will_need
from stateseer.core.traces import ShardedArray


def test_the_ranges_asked_for_are_the_rows_bytes_in_the_mapping(tmp_path):
    """An ``.npz`` member is mapped from the allocation boundary before it, so a row's
    place in the mapping is not its place in the file: a slice of it, rows at its end."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5000, 24)).astype(np.float32)
    np.savez(tmp_path / "a.npz", pad=np.zeros(3001, np.uint8), a=A)
    whole = mapped_member(tmp_path / "a.npz", "a")
    assert whole.offset % mmap.ALLOCATIONGRANULARITY  # the mapping starts before it
    view = whole[3:]
    rows = np.array([0, 17, len(view) - 1])
    lo, hi = mapped_ranges(view, rows, rows + 1)
    start = whole.offset - whole.offset % mmap.ALLOCATIONGRANULARITY
    at = whole.offset - start + (rows + 3) * A.strides[0]
    np.testing.assert_array_equal(hi, at + A.strides[0])
    np.testing.assert_array_equal(lo, at - at % mmap.PAGESIZE)
    assert hi[-1] <= len(whole._mmap)
    assert will_need(view, rows, rows + 1) == 3
    np.testing.assert_array_equal(view[rows], A[rows + 3])  # the data are untouched


def test_only_memory_maps_are_asked_and_sharded_arrays_part_by_part(tmp_path):
    a, b = np.arange(40.0).reshape(20, 2), np.arange(40.0, 70.0).reshape(15, 2)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    assert will_need(a, [0, 5], [3, 9]) == 0  # in memory: nothing to read
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
    assert will_need(mapped, [], []) == 0
    assert will_need(mapped, [4, 7], [4, 9]) == 1  # an empty range asks for nothing
    sharded = ShardedArray([np.load(tmp_path / "a.npy", mmap_mode="r"),
                            np.load(tmp_path / "b.npy", mmap_mode="r")])
    # rows 18..22 span both parts (two ranges), row 30 lies in the second
    assert will_need(sharded, [18, 30], [22, 31]) == 3
    np.testing.assert_array_equal(sharded[np.array([18, 21, 30])],
                                  np.concatenate([a, b])[[18, 21, 30]])
