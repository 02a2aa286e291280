"""The spaces abstract states live in, and chunked reading of hidden states.

``pca``     PCA of the hidden state (DeepSeer).
``margin``  the classifier's own logit differences, read exactly from the recorded
            intermediate predictions, plus the main directions of the hidden state
            orthogonal to the head (``n_components`` of them per logit difference), all
            standardised, the logit differences then weighted by :data:`MARGIN_WEIGHT`.
            It keeps the sentiment "level" an RNN accumulates as one axis, which makes
            the FSM's transitions far more predictable from tokens alone. Fitted with
            the inputs' final predictions (as :func:`stateseer.abstraction.sharded.fit_sharded`
            does), it adds first one *value* axis per logit difference: the direction
            of the hidden state that best predicts the input's final logit difference
            from any of its steps, weighted like a residual axis. A model whose head
            reads the current token as well as the state (Mamba: the residual stream)
            has intermediate logits that swing with the local window; the value axis
            keeps the evidence its state has gathered. Rotten Tomatoes, 40 states,
            seeds 0-2, validation (test) simulation fidelity without → with the value
            axis: Mamba (text defaults) 0.911 / 0.857 / 0.838 → 0.921 / 0.877 / 0.877
            (test 0.916 / 0.878 / 0.835 → 0.929 / 0.892 / 0.898); the default LSTM
            0.901 / 0.896 / 0.909 → 0.904 / 0.890 / 0.911 (test 0.902 / 0.908 / 0.889 →
            0.916 / 0.915 / 0.898).

Why one residual axis per logit difference and a margin weight of 0.5: measured on the
validation splits of the Rotten Tomatoes LSTM (2 classes) and its 3-class variant
(40 states, probabilistic simulation), the FSM alone agrees with the RNN at 0.864 → 0.880
(RT) and 0.748 → 0.865 (3 classes) against one residual axis at weight 1; no residual
axis at all falls to 0.71, more axes than logit differences lose again (0.80 / 0.82).

:func:`iter_rows` reads memory-mapped hidden states chunk by chunk (and releases the pages
behind it), so millions of steps are abstracted without being loaded whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from sklearn.decomposition import PCA

from stateseer.abstraction.errors import AbstractionError
from stateseer.abstraction.kernels import HALF_TABLE, half_project

__all__ = ["FEATURES", "MARGIN_WEIGHT", "Projection", "as_2d", "check_finite", "iter_rows",
           "log_ratios", "nearest_center", "sample_rows", "shared_projections"]

FEATURES = ("margin", "pca")
MARGIN_WEIGHT = 0.5
"""Weight of the standardised logit differences against the standardised residual axes."""
VALUE_RIDGE = 1e-3
"""Ridge of the value axes' least squares, relative to the mean variance of the state."""
VALUE_MIN_R2 = 1e-3
"""A final logit difference the state predicts with less R² than this gets no value axis."""

_SHARED: ContextVar[dict[str, Projection] | None] = ContextVar("stateseer_projections",
                                                                default=None)


@contextmanager
def shared_projections() -> Iterator[dict[str, Projection]]:
    """Within this block, :meth:`Projection.fit` fits each distinct input once.

    A sweep fits many abstractions of one run that differ only in their number of states:
    they draw the same fit sample, so the feature space (PCA, head directions, scales) is
    the same for all. Inside the block a repeated fit on identical arrays and parameters
    returns the space fitted first (keyed by a digest of the inputs, so a different sample
    or parameter is fitted anew); the clustering still runs per candidate.

    Yields
    ------
    dict
        The fitted spaces by digest (``len`` tells how many distinct fits ran).
    """
    cache: dict[str, Projection] = {}
    token = _SHARED.set(cache)
    try:
        yield cache
    finally:
        _SHARED.reset(token)


def _digest(*parts: object) -> str:
    h = hashlib.blake2b(digest_size=16)
    for x in parts:
        if isinstance(x, np.ndarray):
            a = np.ascontiguousarray(x)
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(memoryview(a).cast("B"))
        else:
            h.update(repr(x).encode())
    return h.hexdigest()


def as_2d(X, name: str = "hidden states") -> np.ndarray:
    if not hasattr(X, "shape") or len(X.shape) != 2:
        raise AbstractionError(f"{name} must be a 2-D array (n_steps, state_size)")
    return X


def iter_rows(X, chunk_size: int, *others, lo: int = 0, hi: int | None = None,
              half: bool = False):
    """Yield ``(start, X[start:stop], *others[start:stop])`` chunk by chunk (rows ``lo`` to
    ``hi`` only, when given: chunks start at ``lo``).

    The block is float32: a view when ``X`` is float32 (no copy), else a converted copy;
    with ``half``, float16 rows come as they are (for :meth:`Projection.transform`, which
    reads them without a float32 copy). Memory-mapped inputs are released
    once the consumer has moved on (``madvise(DONTNEED)``), so abstracting millions of
    memory-mapped steps keeps the process's resident memory at a chunk, not at the size
    of the file; the consumer must not keep a block past its iteration.
    """
    import mmap

    mm = getattr(X, "_mmap", None)
    end = X.shape[0] if hi is None else min(hi, X.shape[0])
    for start in range(lo, end, chunk_size):
        stop = min(start + chunk_size, end)
        block = (np.asarray(X[start:stop]) if half and X.dtype == np.float16
                 else np.asarray(X[start:stop], dtype=np.float32))
        rest = tuple(None if o is None else np.asarray(o[start:stop]) for o in others)
        yield (start, block, *rest)
        del block
        if mm is not None and hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            row = X.strides[0]
            lo = X.offset + start * row
            lo -= lo % mmap.PAGESIZE
            hi = X.offset + stop * row
            hi -= hi % mmap.PAGESIZE  # keep the page shared with the next chunk
            if hi > lo:
                mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def sample_rows(n: int, k: int, rng: np.random.Generator, run: int = 16) -> np.ndarray:
    """``k`` row indices: random runs of ``run`` consecutive rows (few page faults on a
    memory map), sorted."""
    if n <= k:
        return np.arange(n)
    n_runs = max(1, k // run)
    starts = np.sort(rng.choice(max(1, n // run), size=min(n_runs, max(1, n // run)),
                                replace=False)) * run
    idx = (starts[:, None] + np.arange(run)).ravel()
    return idx[idx < n]


def check_finite(block: np.ndarray, start: int) -> None:
    finite = np.isfinite(block)
    if not finite.all():
        row = start + int(np.flatnonzero(~finite.all(axis=1))[0])
        raise AbstractionError(
            f"hidden state {row} contains NaN or infinity; the model or its traces are broken "
            "— retrain or re-record the run"
        )


def log_ratios(proba: np.ndarray) -> np.ndarray:
    """Logit differences log(p_c / p_0) for c = 1..C-1, shape (n, C-1).

    For a linear head these are exactly ``(W_c - W_0) h + (b_c - b_0)``: the classifier's
    own coordinates of the hidden state (the logit margin, for two classes).
    """
    P = np.clip(np.asarray(proba, dtype=np.float64), 1e-12, 1.0)
    return np.log(P[:, 1:]) - np.log(P[:, :1])


def _residual_pca(SS: np.ndarray, mu: np.ndarray, Q: np.ndarray, m: int, n: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """PCA of the residuals ``R = S - S Q Q^T`` from the Gram matrix ``SS = S^T S``.

    The same mean and components as ``PCA(n, svd_solver="covariance_eigh").fit(R)``
    (covariance ``Pm (SS - m mu mu^T) Pm / (m - 1)`` with ``Pm = I - Q Q^T``, its leading
    eigenvectors, signs as scikit-learn's ``svd_flip``) without forming ``R``.

    Parameters
    ----------
    SS : ndarray of shape (d, d)
    mu : ndarray of shape (d,)
        Mean of the rows of ``S``.
    Q : ndarray of shape (d, q)
        Orthonormal columns.
    m : int
        Rows of ``S``.
    n : int
        Components kept.

    Returns
    -------
    mean : ndarray of shape (d,)
    components : ndarray of shape (n, d)
    """
    Pm = np.eye(len(SS)) - Q @ Q.T
    C = Pm @ (SS - m * np.outer(mu, mu)) @ Pm / max(m - 1, 1)
    _, vecs = np.linalg.eigh((C + C.T) / 2)
    comps = vecs[:, ::-1][:, :n].T
    signs = np.sign(comps[np.arange(n), np.abs(comps).argmax(axis=1)])
    signs[signs == 0] = 1.0
    return mu @ Pm, comps * signs[:, None]


GRAM_ROWS = 4096  # rows per float64 block of the Gram matrix


class Projection:
    """The low-dimensional space the states are clustered in (plain arrays, no pickle).

    ``pca``     PCA of the hidden state (DeepSeer): ``(h - mean) @ components.T``.
    ``margin``  the classifier's logit differences (from the intermediate predictions) and
                the top principal axes of ``h`` orthogonal to the head's directions (the
                fit's ``n_components`` per logit difference), each divided by its standard
                deviation on the fitting sample; the logit differences are then weighted by
                ``margin_weight``.
    """

    def __init__(self, kind: str, arrays: dict[str, np.ndarray]) -> None:
        self.kind = kind
        self.arrays = {k: np.asarray(v) for k, v in arrays.items()}

    @property
    def n_components(self) -> int:
        return int(self.arrays["scale"].shape[0])

    @classmethod
    def fit(cls, kind: str, S: np.ndarray, P: np.ndarray | None, n_components: int,
            random_state: int | None, *, margin_weight: float = MARGIN_WEIGHT,
            final: np.ndarray | None = None) -> Projection:
        """Fit the space on hidden states ``S`` (n, d) and predictions ``P`` (n, C).

        ``n_components``: PCA dimensions (``pca``), or residual axes per logit difference
        (``margin``: ``n_components * (C - 1)`` in all, at most ``d`` less the head's and
        the value axes' dimensions). With
        ``final`` (n, C), the final prediction of each row's input, ``margin`` also gets
        one *value* axis per logit difference: the direction of ``h`` that best predicts
        (least squares) the input's final logit difference from any of its steps. Inside
        :func:`shared_projections`, identical inputs are fitted once.
        """
        cache = _SHARED.get()
        if cache is None:
            return cls._fit(kind, S, P, n_components, random_state, margin_weight, final)
        key = _digest(kind, np.asarray(S), None if P is None else np.asarray(P),
                      n_components, random_state, margin_weight,
                      None if final is None else np.asarray(final))
        if key not in cache:
            cache[key] = cls._fit(kind, S, P, n_components, random_state, margin_weight,
                                  final)
        hit = cache[key]
        return cls(hit.kind, {k: v.copy() for k, v in hit.arrays.items()})

    @classmethod
    def _fit(cls, kind: str, S: np.ndarray, P: np.ndarray | None, n_components: int,
             random_state: int | None, margin_weight: float,
             final: np.ndarray | None = None) -> Projection:
        """:meth:`fit` without the cache."""
        if kind == "pca":
            n = int(min(n_components, S.shape[1], len(S)))
            pca = PCA(n_components=n, svd_solver="covariance_eigh",
                      random_state=random_state).fit(S)
            return cls("pca", {"mean": pca.mean_, "components": pca.components_,
                               "scale": np.ones(n)})
        if P is None:
            raise AbstractionError("margin features need the intermediate predictions (proba); "
                                   "pass proba= or use --features pca")
        L = log_ratios(P)
        m, d = S.shape
        F = None if final is None else log_ratios(final)
        SS, SL, total = np.zeros((d, d)), np.zeros((d, L.shape[1])), np.zeros(d)
        SF = None if F is None else np.zeros((d, F.shape[1]))
        for a in range(0, m, GRAM_ROWS):  # float64 in blocks: no float64 copy of S
            blk = np.asarray(S[a:a + GRAM_ROWS], np.float64)
            SS += blk.T @ blk  # the Gram matrix serves the head fit and the residual PCA
            SL += blk.T @ L[a:a + GRAM_ROWS]
            if SF is not None:
                SF += blk.T @ F[a:a + GRAM_ROWS]
            total += blk.sum(axis=0)
        G = np.empty((d + 1, d + 1))  # normal equations of [S, 1] (d + 1 unknowns per class)
        G[:d, :d], G[:d, d], G[d, :d], G[d, d] = SS, total, total, m
        G[np.diag_indices_from(G)] += 1e-8 * max(float(np.trace(G)) / len(G), 1.0)
        head = np.linalg.solve(G, np.vstack([SL, L.sum(axis=0)]))[:-1].T  # (C-1, d)
        value = np.zeros((0, d))
        if F is not None:  # value axes: least squares of the input's final logits on h
            mu = total / m
            cov = SS - m * np.outer(mu, mu)
            cov[np.diag_indices_from(cov)] += VALUE_RIDGE * max(float(np.trace(cov)) / d,
                                                                1e-12)
            rhs = SF - np.outer(mu, F.sum(axis=0))
            w = np.linalg.solve(cov, rhs)  # (d, C-1)
            # a final logit the state does not predict (constant, or unrelated: R^2 below
            # 1e-3) gets no axis, not a direction of rounding noise
            spread = ((F - F.mean(axis=0)) ** 2).sum(axis=0)
            told = (spread > 1e-9 * m) & ((w * rhs).sum(axis=0) > VALUE_MIN_R2 * spread)
            if told.any():
                value = np.linalg.qr(w[:, told])[0].T  # orthonormal, (min(k, d), d)
        Q, _ = np.linalg.qr(np.vstack([head, value]).T)  # orthonormal basis of their span
        n = int(min(n_components * L.shape[1], d - Q.shape[1], m))
        if n > 0:
            mean, comps = _residual_pca(SS, total / m, Q, m, n)
        else:
            mean, comps = np.zeros(d), np.zeros((0, d))
        if len(value):  # the value axes first (the mean's shift along them is constant)
            comps = np.vstack([value, comps])
        raw = np.column_stack([L, S @ comps.T.astype(np.float32)
                               - (mean @ comps.T).astype(np.float32)])
        scale = raw.std(axis=0)
        scale[scale == 0] = 1.0
        if not margin_weight > 0:
            raise AbstractionError(f"margin_weight must be positive, not {margin_weight}")
        scale[:L.shape[1]] /= margin_weight  # transform divides by scale
        return cls("margin", {"mean": mean, "components": comps, "scale": scale,
                              "head": head})

    def transform(self, X: np.ndarray, P: np.ndarray | None = None) -> np.ndarray:
        """Coordinates of hidden states ``X`` (n, d) with predictions ``P`` (n, C).

        Float16 states (``record --dtype float16``) are projected by a compiled loop
        (:func:`stateseer.abstraction.kernels.half_project`) that reads them in place: numpy's
        float16 -> float32 copy alone took 1.8 ns a value, 45 % of an assignment.
        """
        a = self.arrays
        X = np.asarray(X)
        comps = np.ascontiguousarray(a["components"], dtype=np.float32)
        shift = (a["mean"] @ a["components"].T).astype(np.float32)
        if X.dtype == np.float16 and half_project is not None:
            Z = np.empty((len(X), len(comps)), np.float32)
            half_project(np.ascontiguousarray(X).view(np.uint16), HALF_TABLE, comps, Z)
            Z -= shift
        else:
            Z = np.asarray(X, dtype=np.float32) @ comps.T - shift
        if self.kind == "margin":
            if P is None:
                raise AbstractionError("this abstraction uses margin features: pass proba")
            Z = np.column_stack([log_ratios(P).astype(np.float32), Z])
            Z /= a["scale"].astype(np.float32)
        return Z


def nearest_center(Z: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Index of the nearest center for every row (squared Euclidean), vectorised."""
    d = (centers * centers).sum(1)[None, :] - 2.0 * (Z @ centers.T)
    return d.argmin(axis=1)
