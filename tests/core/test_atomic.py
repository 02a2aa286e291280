"""Atomic writers: a .npy written a block of rows at a time."""

from __future__ import annotations

import numpy as np

from stateseer.core.atomic import atomic_save_npy_rows


def test_rows_written_in_blocks_are_np_save_of_the_converted_array(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(1001, 7))
    np.save(tmp_path / "a.npy", a)
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
    atomic_save_npy_rows(tmp_path / "b.npy", mapped, np.float32, block_bytes=100)  # 3 rows
    np.save(tmp_path / "want.npy", a.astype(np.float32))
    assert (tmp_path / "b.npy").read_bytes() == (tmp_path / "want.npy").read_bytes()
    # a Fortran-ordered array is written in C order (rows contiguous), the same values
    atomic_save_npy_rows(tmp_path / "f.npy", np.asfortranarray(a), block_bytes=1 << 10)
    back = np.load(tmp_path / "f.npy")
    assert back.flags.c_contiguous and np.array_equal(back, a)
    # a broadcast row, an empty array and a 1-d one
    atomic_save_npy_rows(tmp_path / "u.npy", np.broadcast_to(np.float32(0.5), (9, 3)))
    assert np.array_equal(np.load(tmp_path / "u.npy"), np.full((9, 3), 0.5, np.float32))
    atomic_save_npy_rows(tmp_path / "e.npy", np.zeros((0, 4), np.float16))
    assert np.load(tmp_path / "e.npy").shape == (0, 4)
    atomic_save_npy_rows(tmp_path / "i.npy", np.arange(10), block_bytes=8)
    assert np.load(tmp_path / "i.npy").tolist() == list(range(10))
