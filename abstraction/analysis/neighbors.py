"""Nearest training contexts: an inverted-file index over recorded hidden states.

For any step of any trace, :class:`ContextIndex` finds the recorded training steps whose
hidden states are closest (Euclidean), the way exBERT and Seq2Seq-Vis show the nearest
training contexts of a representation. Exact search over a million 256-dimensional states
reads a gigabyte per query; the index instead

1. projects the states onto their top principal axes (``n_components``, 48 by default),
2. partitions the projected states with (mini-batch) k-means into ``n_lists`` inverted
   lists, stored contiguously as int8 codes (each coordinate in 255 steps of the
   fitting sample's range: a quarter of float32's bytes to keep and to read),
3. at query time scans only the ``n_probe`` lists nearest to the query, keeps the best
   ``rerank`` candidates in the projected space, and re-ranks them exactly in the full
   hidden space (a handful of rows read from the memory-mapped traces).

``benchmarks/nearest_contexts.py`` measures its latency and recall against brute force.
Plain arrays only: :meth:`save` writes an uncompressed ``.npz`` without pickles.

Out of core: given a ``workdir``, :meth:`fit` and :meth:`fit_shards` keep the codes in
memory-mapped files there (the training states are encoded a batch of rows at a time and
the inverted lists gathered chunk by chunk), so building needs memory for a few integers
per step, not for the codes. :meth:`load` maps the large members (``codes``, ``order``,
``norms``) straight from the ``.npz`` (its members are stored, not deflated): a query
reads only the pages of the lists it probes, and the kernel may drop them again.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.cluster import MiniBatchKMeans
from sklearn.decomposition import PCA

from stateseer.abstraction.abstractors.features import as_2d, iter_rows, sample_rows
from stateseer.abstraction.arrays import will_need
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.atomic import atomic_save_npz
from stateseer.core.errors import DAMAGED_NPY

__all__ = ["ContextIndex", "brute_force_neighbors"]

FORMAT = "stateseer.neighbors"
VERSION = 1
#: the most inverted lists the default shape uses
MAX_LISTS = 4096
#: lists a query scans by default, and the rows they should hold at least (small indexes)
PROBE, MIN_SCAN = 64, 50_000
#: up to this many lists, one level of centres; above, two (top centres, then theirs)
FLAT_LISTS = 256
#: rows encoded per batch (their codes held in memory at once)
BATCH_ROWS = 1 << 19
#: members :meth:`ContextIndex.load` maps from disk instead of reading
MAPPED = ("codes", "order", "norms", "pc2")


def _nearest(z: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Index of the nearest centre of each row, int32 of shape (n,), in row blocks that
    bound the distance matrix."""
    c2 = (centers ** 2).sum(1)
    out = np.empty(len(z), np.int32)
    sub = max(1024, (1 << 22) // max(len(centers), 1))
    for a in range(0, len(z), sub):
        out[a:a + sub] = (c2[None, :] - 2.0 * (z[a:a + sub] @ centers.T)).argmin(1)
    return out


def _buffer(workdir: Path | None, name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """A new array: a ``.npy`` memory map in ``workdir``, or in memory without one."""
    if workdir is None:
        return np.empty(shape, dtype)
    workdir.mkdir(parents=True, exist_ok=True)
    return np.lib.format.open_memmap(workdir / f"{name}.npy", mode="w+", dtype=dtype,
                                     shape=shape)


def mapped_member(path: str | Path, name: str) -> np.ndarray | None:
    """Member ``name`` of an uncompressed ``.npz`` as a read-only memory map (None when it
    is absent or deflated)."""
    path = Path(path)
    with zipfile.ZipFile(path) as zf:
        try:
            info = zf.getinfo(f"{name}.npy")
        except KeyError:
            return None
        if info.compress_type != zipfile.ZIP_STORED:
            return None
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)
        if local[:4] != b"PK\x03\x04":
            raise ValueError(f"{name}.npy: bad local header")
        start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") \
            + int.from_bytes(local[28:30], "little")
        fh.seek(start)
        version = np.lib.format.read_magic(fh)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(fh)
        offset = fh.tell()
    if fortran or dtype.hasobject:
        return None
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def _sq_dists(Z: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Squared distances of rows of ``Z`` (n, d) to ``q`` (d,), float32 BLAS."""
    diff = Z - q
    return np.einsum("ij,ij->i", diff, diff)


def brute_force_neighbors(X, q: np.ndarray, k: int = 10, chunk_size: int = 131_072,
                          norms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest rows of ``X`` to ``q`` by a full scan (the baseline).

    Parameters
    ----------
    X : array-like of shape (n, d)
    q : ndarray of shape (d,)
    k : int
    norms : ndarray of shape (n,), optional
        Precomputed squared norms of the rows (saves a pass over ``X`` per query).

    Returns
    -------
    dist : ndarray of shape (k,)
        Euclidean distances, ascending.
    idx : ndarray of shape (k,)
    """
    q = np.asarray(q, np.float32)
    best_d, best_i = np.zeros(0, np.float32), np.zeros(0, np.int64)
    for start, block in iter_rows(X, chunk_size):
        sq = (np.einsum("ij,ij->i", block, block) if norms is None
              else norms[start : start + len(block)])
        d = sq - 2.0 * (block @ q)  # + |q|² later: same ranking
        kk = min(k, len(d))
        part = np.argpartition(d, kk - 1)[:kk]
        best_d = np.concatenate([best_d, d[part]])
        best_i = np.concatenate([best_i, part + start])
        keep = np.argsort(best_d, kind="stable")[:k]
        best_d, best_i = best_d[keep], best_i[keep]
    dist = np.sqrt(np.maximum(best_d + float(q @ q), 0.0))
    return dist, best_i


class ContextIndex(BaseEstimator):
    """Approximate nearest-neighbour index over hidden states (PCA → IVF → exact re-rank).

    Parameters
    ----------
    n_components : int, default 48
        Principal axes the coarse search runs in.
    n_lists : int or None, default None
        Inverted lists; ``None`` uses the square root of the number of rows, clipped to
        [1, 4096], so a query scans about ``n_probe / sqrt(n)`` of the rows: a share that
        falls as the index grows (the former ``n / 2,000`` up to 256 lists scanned 27 % at
        every size from 1M; ``benchmarks/explorer_scale.py index``). Above 256 lists the
        centres have two levels: about ``sqrt(n_lists)`` top centres, each with its own, so
        a row is assigned by about ``2 sqrt(n_lists)`` distances instead of ``n_lists``.
    n_probe : int or None, default None
        Lists scanned per query; ``None``: 64, or more on a small index, enough lists to
        hold :data:`MIN_SCAN` rows on average (a small index is cheap to scan, and its
        lists are too small for 64 of them to hold the neighbours).
    rerank : int, default 1024
        Candidates re-ranked exactly in the full space (when the full states are given).
    max_fit_samples : int, default 60_000
        Rows the PCA and the k-means are fitted on.
    chunk_size : int, default 131_072
    random_state : int, default 0
    workdir : str or Path, optional
        Where the codes are kept while building (memory-mapped files, removed by the
        caller once :meth:`save` has written the index); default in memory.

    Attributes
    ----------
    mean_, components_ : ndarray
        The projection, shapes (d,) and (n_components, d).
    centers_ : ndarray of shape (n_lists, n_components)
    top_, top_ptr_ : ndarray or None
        With two levels, the top centres (n_top, n_components) and the range of
        ``centers_`` under each (n_top + 1,); None with one level.
    list_ptr_ : ndarray of shape (n_lists + 1,)
        List ``j`` holds rows ``order_[list_ptr_[j]:list_ptr_[j + 1]]``.
    order_ : ndarray of shape (n,)
        Original row of every stored vector.
    codes_ : ndarray of shape (n, n_components)
        Projected states in list order, int8: each coordinate in steps of ``scale_``
        (48 bytes a step instead of 192 as float32; an index saved before holds float32
        codes and no ``scale_``).
    scale_ : ndarray of shape (n_components,) or None
        The step of each coordinate: its largest magnitude in the fitting sample / 127.
    norms_ : ndarray of shape (n,)
        Squared norms of the codes as read back (``codes_ * scale_``).
    pc2_ : ndarray of shape (n, 2) or None
        Their first two columns, contiguous (the explorer's projection reads them without
        reading every code); None in an index saved before they were stored.
    """

    def __init__(self, n_components: int = 48, n_lists: int | None = None,
                 n_probe: int | None = None,
                 rerank: int = 1024, max_fit_samples: int = 60_000,
                 chunk_size: int = 131_072, random_state: int = 0,
                 workdir: str | Path | None = None) -> None:
        self.n_components = n_components
        self.n_lists = n_lists
        self.n_probe = n_probe
        self.rerank = rerank
        self.max_fit_samples = max_fit_samples
        self.chunk_size = chunk_size
        self.random_state = random_state
        self.workdir = workdir

    # fitting ------------------------------------------------------------------------------
    def fit(self, X, y=None) -> ContextIndex:
        """Build the index over the rows of ``X`` (n_steps, state_size); memmaps welcome."""
        X = as_2d(X)
        n, d = X.shape
        if n == 0:
            raise AbstractionError("no hidden states to index: the split is empty")
        rng = np.random.default_rng(self.random_state)
        S = np.asarray(X[sample_rows(n, self.max_fit_samples, rng)], np.float32)
        self._fit_lists(S, n, d)
        codes, pc2, lists = self._step_buffers(n)
        step = max(BATCH_ROWS // self.chunk_size, 1) * self.chunk_size  # whole chunks
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            z, lists[lo:hi] = self.encode(X, rows=(lo, hi))
            codes[lo:hi], pc2[lo:hi] = self.quantise(z), z[:, :2]
        return self._store(codes, pc2, lists)

    def _step_buffers(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The step-ordered codes (int8), first two coordinates and lists of ``n`` rows."""
        q = self.components_.shape[0]
        return (self._buf("codes_by_step", (n, q), np.int8),
                self._buf("pc2_by_step", (n, min(2, q)), np.float32), np.empty(n, np.int32))

    def quantise(self, z: np.ndarray) -> np.ndarray:
        """Stored codes of projected rows ``z`` (n, n_components): int8, ``z / scale_``
        rounded (and clipped to +-127, for rows beyond the fitting sample's range)."""
        return np.clip(np.rint(z / self.scale_), -127, 127).astype(np.int8)

    def _buf(self, name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        return _buffer(None if self.workdir is None else Path(self.workdir), name, shape,
                       dtype)

    def fit_shards(self, refs, engine) -> ContextIndex:
        """:meth:`fit` over the shards of a split (:mod:`stateseer.abstraction.sharded`): the sample
        drawn per shard, the projection and the lists fitted here, every shard encoded
        by ``engine`` (in-process or Dask; on a cluster in pieces of shards), the inverted
        lists built from the shards' codes in shard order. With one shard it is :meth:`fit`
        on the whole split, bit for bit.

        Parameters
        ----------
        refs : list of ShardRef
        engine : Engine
        """
        from stateseer.abstraction.sharded import (
            fit_quotas,
            index_piece,
            open_ref,
            pieces_per_shard,
            sample_shard,
            step_pieces,
        )

        n = sum(r.n_steps for r in refs)
        if n == 0:
            raise AbstractionError("no hidden states to index: the split is empty")
        quotas = fit_quotas([r.n_steps for r in refs], int(self.max_fit_samples))
        items = [(r, int(q)) for r, q in zip(refs, quotas, strict=True) if q > 0]
        try:
            parts = engine.map(sample_shard, items, random_state=self.random_state)
        except AbstractionError:
            raise AbstractionError("hidden states contain NaN or infinity; re-record the "
                                   "run") from None
        S = np.concatenate([p[0] for p in parts])
        self._fit_lists(S, n, open_ref(refs[0]).hidden.shape[1])
        # on a cluster, pieces of shards in runs of whole chunks: the same chunks as the
        # whole shard's encoding, so the same codes (one shard no longer runs on one worker)
        # pieces of whole chunks (at most BATCH_ROWS rows each), encoded a batch at a time
        # into the step-ordered codes: the memory held is one batch's codes
        k = pieces_per_shard(engine, len(refs))
        chunk = int(self.chunk_size)
        per = max(BATCH_ROWS // chunk, 1) * chunk
        pieces = [p for r in refs
                  for p in step_pieces(r, max(k, -(-r.n_steps // per)), chunk)]
        codes, pc2, lists = self._step_buffers(n)
        at, batch, rows = 0, [], 0
        for i, piece in enumerate(pieces):
            batch.append(piece)
            rows += piece[2] - piece[1]
            if rows < BATCH_ROWS and i + 1 < len(pieces):
                continue
            for z, lst in engine.map(index_piece, batch, index=self):
                codes[at:at + len(lst)], lists[at:at + len(lst)] = self.quantise(z), lst
                pc2[at:at + len(lst)] = z[:, :2]
                at += len(lst)
            batch, rows = [], 0
        return self._store(codes, pc2, lists)

    def _fit_lists(self, S: np.ndarray, n: int, d: int) -> None:
        """Projection and list centres from the sample ``S`` of ``n`` rows of width ``d``."""
        if not np.isfinite(S).all():
            raise AbstractionError("hidden states contain NaN or infinity; re-record the run")
        n_comp = int(min(self.n_components, d, len(S)))
        pca = PCA(n_components=n_comp, svd_solver="covariance_eigh",
                  random_state=self.random_state).fit(S)
        self.mean_ = pca.mean_.astype(np.float32)
        self.components_ = pca.components_.astype(np.float32)
        n_lists = self.n_lists or int(np.clip(np.sqrt(n), 1, MAX_LISTS))
        n_lists = int(min(n_lists, len(S)))
        Z = self.transform(S)
        # int8 codes: each coordinate in steps of its largest magnitude in the sample / 127
        top = np.abs(Z).max(0) if len(Z) else np.ones(Z.shape[1], np.float32)
        self.scale_ = np.where(top > 0, top / 127, 1.0).astype(np.float32)
        if n_lists <= FLAT_LISTS:
            self.centers_ = self._kmeans(Z, n_lists)
            self.top_ptr_ = None
        else:  # two levels: a row is assigned among ~2 sqrt(n_lists) centres, not n_lists
            n_top = int(np.ceil(np.sqrt(n_lists)))
            per = int(np.ceil(n_lists / n_top))
            top = self._kmeans(Z, n_top)
            near = _nearest(Z, top)
            centers, ptr = [], [0]
            for c in range(n_top):
                members = Z[near == c]
                sub = self._kmeans(members, min(per, len(members))) if len(members) \
                    else top[c:c + 1]
                centers.append(sub)
                ptr.append(ptr[-1] + len(sub))
            self.top_ = top
            self.top_ptr_ = np.asarray(ptr, np.int64)
            self.centers_ = np.concatenate(centers)
        self.n_features_in_ = d

    def _kmeans(self, Z: np.ndarray, k: int) -> np.ndarray:
        """``k`` centres of the rows ``Z`` (mini-batch k-means), float32."""
        km = MiniBatchKMeans(n_clusters=k, n_init=1, batch_size=4096, max_iter=50,
                             random_state=self.random_state).fit(Z)
        return km.cluster_centers_.astype(np.float32)

    def _assign(self, z: np.ndarray) -> np.ndarray:
        """The list of each projected row, shape (n,) int32: the nearest centre, or with
        two levels the nearest centre under the nearest top centre."""
        if getattr(self, "top_ptr_", None) is None:
            return _nearest(z, self.centers_)
        top = _nearest(z, self.top_)
        out = np.empty(len(z), np.int32)
        order = np.argsort(top, kind="stable")
        bounds = np.searchsorted(top[order], np.arange(len(self.top_) + 1))
        for c in range(len(self.top_)):  # one product per top centre, over its rows
            rows = order[bounds[c]:bounds[c + 1]]
            if len(rows):
                a, b = self.top_ptr_[c], self.top_ptr_[c + 1]
                out[rows] = a + _nearest(z[rows], self.centers_[a:b])
        return out

    def encode(self, X, rows: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Projected codes (n, n_components) float32 and list (n,) int32 of rows ``X``
        (only rows ``lo`` to ``hi`` with ``rows=(lo, hi)``), read chunk by chunk from the
        first row asked for."""
        lo, hi = (0, X.shape[0]) if rows is None else (int(rows[0]), int(rows[1]))
        n = max(hi - lo, 0)
        codes = np.empty((n, self.components_.shape[0]), np.float32)
        lists = np.empty(n, np.int32)
        for start, block in iter_rows(X, self.chunk_size, lo=lo, hi=hi):
            z = self.transform(block)
            at = start - lo
            codes[at : at + len(z)] = z
            lists[at : at + len(z)] = self._assign(z)
        return codes, lists

    def _store(self, codes: np.ndarray, pc2: np.ndarray, lists: np.ndarray) -> ContextIndex:
        """The inverted lists: codes (and first two coordinates) in list order (stable:
        step order within a list), the norms of the codes as they are read back."""
        n = len(lists)
        self.order_ = np.argsort(lists, kind="stable").astype(np.int64)
        self.codes_ = self._buf("codes", codes.shape, np.int8)
        self.norms_ = self._buf("norms", (n,), np.float32)
        self.pc2_ = self._buf("pc2", pc2.shape, np.float32)
        for lo in range(0, n, BATCH_ROWS):  # gathered chunk by chunk (rows sorted per read)
            rows = self.order_[lo:lo + BATCH_ROWS]
            srt = np.argsort(rows)
            block = np.empty((len(rows), codes.shape[1]), np.int8)
            block[srt] = codes[rows[srt]]
            self.codes_[lo:lo + len(rows)] = block
            z = block * self.scale_
            self.norms_[lo:lo + len(rows)] = np.einsum("ij,ij->i", z, z)
            xy = np.empty((len(rows), pc2.shape[1]), np.float32)
            xy[srt] = pc2[rows[srt]]
            self.pc2_[lo:lo + len(rows)] = xy
        self.list_ptr_ = np.searchsorted(lists[self.order_], np.arange(len(self.centers_) + 1))
        self.n_indexed_ = n
        for step_ordered in (codes, pc2):  # the step-ordered copies are no longer needed
            if isinstance(step_ordered, np.memmap):
                name = step_ordered.filename
                del step_ordered
                Path(name).unlink(missing_ok=True)
        return self

    def transform(self, X) -> np.ndarray:
        """Projected coordinates, shape (n, n_components)."""
        # float64 products rounded once to float32: the same bits whatever BLAS kernel
        # or thread count computes them (in this process or on a one-thread Dask worker)
        X = np.asarray(X, np.float32)
        return ((X - self.mean_).astype(np.float64)
                @ self.components_.T.astype(np.float64)).astype(np.float32)

    # querying -----------------------------------------------------------------------------
    def kneighbors(self, q: np.ndarray, k: int = 10, X=None,
                   n_probe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` indexed rows nearest to one hidden state.

        Parameters
        ----------
        q : ndarray of shape (state_size,)
        k : int
        X : array-like of shape (n_indexed, state_size), optional
            The indexed states themselves; with them the candidates are re-ranked exactly
            and the distances are true Euclidean distances (otherwise projected ones).
        n_probe : int, optional
            Lists to scan (default the estimator's).

        Returns
        -------
        dist : ndarray of shape (k',)
            Ascending; ``k' = min(k, n_indexed)``.
        idx : ndarray of shape (k',)
            Row numbers in the indexed array.
        """
        q = np.asarray(q, np.float32).ravel()
        if q.shape[0] != self.n_features_in_:
            raise AbstractionError(f"the query has {q.shape[0]} dimensions but the index was "
                                   f"built on {self.n_features_in_}; rebuild it for this model")
        if not np.isfinite(q).all():
            raise AbstractionError("the query hidden state contains NaN or infinity")
        z = self.transform(q[None])[0]
        probe = int(min(n_probe or self.n_probe or self.default_probe(), len(self.centers_)))
        cd = _sq_dists(self.centers_, z)
        order = np.argsort(cd)
        ptr = self.list_ptr_
        while probe < len(cd) and ptr[order[:probe] + 1].sum() - ptr[order[:probe]].sum() < k:
            probe = min(2 * probe, len(cd))  # tiny lists: widen the search
        # the probed lists' pages are asked for together (a cold cache reads them side by
        # side), then one matrix-vector product per list on the stored (contiguous) codes
        probed = order[:probe]
        will_need(self.codes_, ptr[probed], ptr[probed + 1])
        will_need(self.norms_, ptr[probed], ptr[probed + 1])
        pos = np.concatenate([np.arange(ptr[j], ptr[j + 1]) for j in order[:probe]])
        self.last_scanned_ = len(pos)  # rows this query scanned (what a benchmark reports)
        scale = getattr(self, "scale_", None)  # None: an index of float32 codes
        zq = z if scale is None else z * scale  # code @ (z * scale) == (code * scale) @ z
        d = np.concatenate([self.norms_[ptr[j] : ptr[j + 1]]
                            - 2.0 * (np.asarray(self.codes_[ptr[j] : ptr[j + 1]],
                                                np.float32) @ zq)
                            for j in order[:probe]]) + float(z @ z)
        r = int(min(max(self.rerank, k), len(d))) if X is not None else int(min(k, len(d)))
        cand = np.argpartition(d, r - 1)[:r] if r < len(d) else np.arange(len(d))
        rows = self.order_[pos[cand]]
        if X is not None:
            srt = np.argsort(rows)  # sorted reads are kinder to a memory map
            will_need(X, rows, rows + 1)  # (abstraction.arrays.will_need: 1.5 s -> ms)
            full = np.asarray(X[rows[srt]], np.float32)
            dd = np.empty(len(rows), np.float32)
            dd[srt] = _sq_dists(full, q)
        else:
            dd = d[cand]
        top = np.argsort(dd, kind="stable")[:k]
        return np.sqrt(np.maximum(dd[top], 0.0)), rows[top]

    def default_probe(self) -> int:
        """Lists a query scans without ``n_probe``: 64, or enough to hold
        :data:`MIN_SCAN` rows on average."""
        n_lists = len(self.centers_)
        return max(PROBE, int(np.ceil(MIN_SCAN * n_lists / max(self.n_indexed_, 1))))

    # persistence --------------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"format": np.array(FORMAT), "version": np.array(VERSION),
                "params": np.array([self.n_components, len(self.centers_), self.n_probe or 0,
                                    self.rerank, self.random_state]),
                "mean": self.mean_, "components": self.components_, "centers": self.centers_,
                "list_ptr": self.list_ptr_, "order": self.order_, "codes": self.codes_,
                "norms": self.norms_,
                **({} if getattr(self, "pc2_", None) is None else {"pc2": self.pc2_}),
                **({} if getattr(self, "scale_", None) is None else {"scale": self.scale_}),
                **({} if getattr(self, "top_ptr_", None) is None else
                   {"top": self.top_, "top_ptr": self.top_ptr_})}

    def save(self, path: str | Path) -> None:
        """Write the index as an uncompressed ``.npz`` atomically (no pickles; memory-mapped
        arrays are streamed from disk)."""
        atomic_save_npz(path, **self.to_arrays())

    @classmethod
    def load(cls, path: str | Path, *, mmap: bool = True) -> ContextIndex:
        """Read an index written by :meth:`save`; with ``mmap`` its codes, order and norms
        are mapped from the file rather than read (an index saved before norms were
        stored computes them)."""
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["format"]) != FORMAT or int(z["version"]) != VERSION:
                    raise AbstractionError(f"{path} is not a stateseer neighbour index v1; "
                                           "delete it to rebuild it")
                n_comp, n_lists, n_probe, rerank, seed = (int(v) for v in z["params"])
                ix = cls(n_components=n_comp, n_lists=n_lists, n_probe=n_probe or None,
                         rerank=rerank, random_state=seed)
                ix.mean_, ix.components_ = z["mean"], z["components"]
                ix.centers_, ix.list_ptr_ = z["centers"], z["list_ptr"]
                ix.top_, ix.top_ptr_ = ((z["top"], z["top_ptr"]) if "top_ptr" in z.files
                                        else (None, None))
                # int8 codes and their steps; an index saved before them has float32 codes
                ix.scale_ = z["scale"] if "scale" in z.files else None
                for name in MAPPED:
                    arr = mapped_member(path, name) if mmap else None
                    if arr is None and name in z.files:
                        arr = z[name]
                    setattr(ix, f"{name}_", arr)
                if ix.norms_ is None:
                    c = np.asarray(ix.codes_, np.float32) * (
                        1.0 if ix.scale_ is None else ix.scale_)
                    ix.norms_ = np.einsum("ij,ij->i", c, c)
                if len(ix.codes_) != len(ix.order_) or len(ix.norms_) != len(ix.order_) \
                        or ix.list_ptr_[-1] != len(ix.order_) or (
                            ix.pc2_ is not None and len(ix.pc2_) != len(ix.order_)):
                    raise ValueError("its arrays disagree in length")
        except (*DAMAGED_NPY, KeyError) as exc:
            raise AbstractionError(f"cannot read the neighbour index {path} ({exc}); delete "
                                   "it to rebuild it") from None
        ix.n_indexed_ = len(ix.order_)
        ix.n_features_in_ = ix.mean_.shape[0]
        return ix
