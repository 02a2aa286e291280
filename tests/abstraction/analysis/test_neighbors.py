"""Nearest-context index: exactness when every list is probed, recall, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from stateseer.abstraction.abstractors.centroids import state_centroids
from stateseer.abstraction.analysis.neighbors import ContextIndex, brute_force_neighbors
from stateseer.abstraction.errors import AbstractionError
from tests.conftest import one_line


@pytest.fixture(scope="module")
def cloud():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(30, 24)) * 3
    X = (centers[rng.integers(0, 30, 20_000)] + rng.normal(size=(20_000, 24))).astype(
        np.float32)
    Q = (centers[rng.integers(0, 30, 50)] + rng.normal(size=(50, 24))).astype(np.float32)
    return X, Q


def test_brute_force_is_exact(cloud):
    X, Q = cloud
    d, i = brute_force_neighbors(X, Q[0], 7, chunk_size=3000)
    full = np.sqrt(((X - Q[0]) ** 2).sum(1))
    np.testing.assert_allclose(d, np.sort(full)[:7], rtol=1e-4)
    np.testing.assert_allclose(full[i], d, rtol=1e-4)


def test_probing_every_list_with_full_rerank_is_exact(cloud):
    X, Q = cloud
    ix = ContextIndex(n_components=8, n_lists=16, rerank=len(X)).fit(X)
    for q in Q[:10]:
        d, _ = ix.kneighbors(q, 10, X=X, n_probe=16)
        want, _ = brute_force_neighbors(X, q, 10)
        np.testing.assert_allclose(d, want, rtol=1e-4)


def test_default_index_recall(cloud):
    X, Q = cloud
    ix = ContextIndex().fit(X)
    hits = []
    for q in Q:
        d, i = ix.kneighbors(q, 10, X=X)
        assert np.all(np.diff(d) >= -1e-6) and len(set(i.tolist())) == 10
        want, _ = brute_force_neighbors(X, q, 10)
        hits.append(np.mean(d <= want[-1] * (1 + 1e-4) + 1e-6))
    assert np.mean(hits) >= 0.95


def test_save_load_round_trip_and_errors(cloud, tmp_path):
    X, Q = cloud
    ix = ContextIndex(n_lists=8).fit(X)
    ix.save(tmp_path / "ix.npz")
    back = ContextIndex.load(tmp_path / "ix.npz")
    for q in Q[:5]:
        a, b = ix.kneighbors(q, 5, X=X), back.kneighbors(q, 5, X=X)
        np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(AbstractionError) as e:
        back.kneighbors(np.zeros(3), 5)
    assert "dimensions" in one_line(e.value)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(AbstractionError) as e:
        ContextIndex.load(tmp_path / "bad.npz")
    assert "delete it" in one_line(e.value)
    with pytest.raises(AbstractionError):
        ContextIndex().fit(np.zeros((0, 4), np.float32))


def test_centroids_are_member_means():
    rng = np.random.default_rng(1)
    H = rng.normal(size=(1000, 5)).astype(np.float32)
    s = rng.integers(1, 6, 1000)
    c, n = state_centroids(H, s, 7, initial=np.full(5, 9.0), chunk_size=128)
    for k in range(1, 6):
        np.testing.assert_allclose(c[k], H[s == k].mean(0), atol=1e-5)
    assert n[6] == 0 and (c[6] == 0).all() and (c[0] == 9).all()
    with pytest.raises(AbstractionError) as e:
        state_centroids(H, s[:10], 7)
    assert "re-run" in one_line(e.value)


@pytest.mark.parametrize("n_lists", [8, 400])  # one level of centres, and two
def test_an_index_built_on_disk_answers_as_the_one_in_memory(cloud, tmp_path, monkeypatch,
                                                            n_lists):
    import stateseer.abstraction.analysis.neighbors as nb

    X, Q = cloud
    memory = ContextIndex(n_lists=n_lists, chunk_size=1000).fit(X)
    monkeypatch.setattr(nb, "BATCH_ROWS", 3000)  # several batches and gathered chunks
    work = tmp_path / "build"
    disk = ContextIndex(n_lists=n_lists, chunk_size=1000, workdir=work).fit(X)
    assert isinstance(disk.codes_, np.memmap)
    assert sorted(p.name for p in work.iterdir()) == ["codes.npy", "norms.npy", "pc2.npy"]
    for k in ("order_", "codes_", "norms_", "pc2_", "list_ptr_", "centers_", "scale_"):
        assert np.asarray(getattr(memory, k)).tobytes() == np.asarray(getattr(disk, k)).tobytes()
    assert memory.codes_.dtype == np.int8
    # the first two coordinates kept exactly; the codes within half a step of them
    np.testing.assert_allclose(memory.codes_[:, :2] * memory.scale_[:2], memory.pc2_,
                               atol=float(memory.scale_[:2].max()) / 2 + 1e-6)
    np.testing.assert_array_equal(memory.pc2_, memory.transform(X[memory.order_])[:, :2])
    disk.save(tmp_path / "ix.npz")
    mapped = ContextIndex.load(tmp_path / "ix.npz")
    assert all(isinstance(getattr(mapped, f"{m}_"), np.memmap) for m in nb.MAPPED)
    read = ContextIndex.load(tmp_path / "ix.npz", mmap=False)
    assert not isinstance(read.codes_, np.memmap)
    assert (read.top_ptr_ is None) == (n_lists <= nb.FLAT_LISTS)
    for q in Q:
        want = memory.kneighbors(q, 10, X=X)
        for got in (mapped.kneighbors(q, 10, X=X), read.kneighbors(q, 10, X=X)):
            np.testing.assert_array_equal(got[1], want[1])
            np.testing.assert_array_equal(got[0], want[0])


def test_an_index_of_float32_codes_saved_before_int8_still_loads(cloud, tmp_path):
    """Indexes built before the int8 codes hold float32 codes and no scale: they load and
    answer as the new one does (re-ranked in the full space: the same neighbours)."""
    X, Q = cloud
    ix = ContextIndex(n_lists=8).fit(X)
    old = {k: v for k, v in ix.to_arrays().items() if k != "scale"}
    old["codes"] = ix.transform(X[ix.order_])
    old["norms"] = np.einsum("ij,ij->i", old["codes"], old["codes"])
    np.savez(tmp_path / "old.npz", **old)
    back = ContextIndex.load(tmp_path / "old.npz")
    assert back.scale_ is None and back.codes_.dtype == np.float32
    assert ix.codes_.nbytes * 4 == back.codes_.nbytes
    for q in Q[:10]:
        np.testing.assert_array_equal(back.kneighbors(q, 10, X=X)[1], ix.kneighbors(q, 10, X=X)[1])


def test_an_index_saved_without_norms_still_loads(cloud, tmp_path):
    X, Q = cloud
    ix = ContextIndex(n_lists=8).fit(X)
    old = {k: v for k, v in ix.to_arrays().items() if k != "norms"}
    np.savez(tmp_path / "old.npz", **old)
    back = ContextIndex.load(tmp_path / "old.npz")
    np.testing.assert_allclose(back.norms_, ix.norms_, rtol=1e-6)
    np.testing.assert_array_equal(back.kneighbors(Q[0], 5, X=X)[1], ix.kneighbors(Q[0], 5, X=X)[1])
    short = dict(old, order=old["order"][:-1])
    np.savez(tmp_path / "short.npz", **short)
    with pytest.raises(AbstractionError) as e:
        ContextIndex.load(tmp_path / "short.npz")
    assert "delete it" in one_line(e.value)


def test_two_levels_of_centres_assign_within_the_nearest_top_centre_and_keep_recall(cloud):
    X, Q = cloud
    ix = ContextIndex(n_lists=400, n_probe=32).fit(X)
    assert ix.top_ptr_ is not None and len(ix.centers_) == ix.top_ptr_[-1] > 256
    z = ix.transform(X[:500])
    lists = ix._assign(z)
    top = ((z[:, None, :] - ix.top_[None]) ** 2).sum(-1).argmin(1)
    assert np.all((ix.top_ptr_[top] <= lists) & (lists < ix.top_ptr_[top + 1]))
    hits = []
    for q in Q:
        d, _ = ix.kneighbors(q, 10, X=X)
        want, _ = brute_force_neighbors(X, q, 10)
        hits.append(np.mean(d <= want[-1] * (1 + 1e-4) + 1e-6))
    assert np.mean(hits) >= 0.95
