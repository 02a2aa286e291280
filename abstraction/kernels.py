"""Compiled loops for the hot paths that numpy cannot vectorise well.

The probabilistic FSM run (:meth:`stateseer.abstraction.automata.fsm.FSM.simulate_distribution`) is
a chain
of sparse vector-matrix products, one per token, whose cost numpy/scipy spend on
building and indexing a sparse matrix per position. Here it is one loop per input,
compiled by `numba <https://numba.pydata.org>`_ (``nogil``: blocks of inputs run on
threads in parallel; ``cache``: compiled once per installation, not per process).

Without numba, :data:`HAVE_NUMBA` is False and callers keep their numpy/scipy path.
"""

from __future__ import annotations

import numpy as np

__all__ = ["HALF_TABLE", "HAVE_NUMBA", "det_run", "half_project", "input_presence",
           "nearest_centre", "pfa_run", "warm_up"]

try:  # pragma: no cover - exercised where numba is installed (the default)
    import numba
except ImportError:  # pragma: no cover
    numba = None

HAVE_NUMBA = numba is not None


def _pfa_run(tok, offsets, det, indptr, indices, data, n_states, outside, initial, smoothing,
             mean, final, path):
    """Run every input's state distribution through the transition matrix.

    Parameters
    ----------
    tok : int64 array (n_steps,)
        Alphabet ids; negative ids read as ``outside`` (the matrix's stay rows).
    offsets : int64 array (n_inputs + 1,)
    det : int32 array ((V + 1) * n_states,)
        Per matrix row: its only column where the row is one entry of exactly 1 (the
        whole mass moves there: one read instead of three), else -1.
    indptr, indices, data : the CSR arrays of the transition matrix, shape
        ((V + 1) * n_states, n_states): row ``token * n_states + state``.
    n_states, outside, initial : int
    smoothing : float
        Weight of the token-independent matrix ``mean`` (n_states, n_states) mixed in.
    final : float64 array (n_inputs, n_states), written
        Distribution after each input's last token (the initial one-hot when empty).
    path : int64 array (n_steps,) or (0,), written
        Most likely state after every token (first of ties); empty: not computed.
    """
    S = n_states
    want_path = path.shape[0] > 0
    cur = np.zeros(S)
    nxt = np.zeros(S)
    for i in range(offsets.shape[0] - 1):
        cur[:] = 0.0
        cur[initial] = 1.0
        for p in range(offsets[i], offsets[i + 1]):
            v = tok[p]
            if v < 0:
                v = outside
            base = v * S
            nxt[:] = 0.0
            for s in range(S):
                a = cur[s]
                if a != 0.0:
                    r = base + s
                    t = det[r]
                    if t >= 0:
                        nxt[t] += a
                    else:
                        for e in range(indptr[r], indptr[r + 1]):
                            nxt[indices[e]] += a * data[e]
            if smoothing > 0.0:
                for t in range(S):
                    nxt[t] *= 1.0 - smoothing
                for s in range(S):
                    a = cur[s]
                    if a != 0.0:
                        w = smoothing * a
                        for t in range(S):
                            nxt[t] += w * mean[s, t]
            cur, nxt = nxt, cur
            if want_path:
                best = 0
                for t in range(1, S):
                    if cur[t] > cur[best]:
                        best = t
                path[p] = best
        final[i, :] = cur


def _det_run(tok, offsets, delta, initial, out):
    """Run every input through the deterministic transition table.

    Parameters
    ----------
    tok : int64 array (n_steps,)
        Alphabet ids; negative ids read as the table's last column (stay).
    offsets : int64 array (n_inputs + 1,)
    delta : int64 array (n_states, V + 1)
        Target of every (state, token) pair, fallbacks filled; column ``V`` stays.
    initial : int
    out : int64 array (n_steps,), written
        The state after every token.
    """
    outside = delta.shape[1] - 1
    for i in range(offsets.shape[0] - 1):
        cur = initial
        for p in range(offsets[i], offsets[i + 1]):
            v = tok[p]
            cur = delta[cur, outside if v < 0 else v]
            out[p] = cur


def _nearest_centre(points, m2, cc, out):
    """Index of the smallest ``points @ m2 + cc`` of every row (the nearest centre, with
    ``m2 = -2 * centres.T`` and ``cc`` the centres' squared norms; the first of ties),
    without the (n, k) distance matrix.

    Parameters
    ----------
    points : float64 array (n, d)
    m2 : float64 array (d, k)
    cc : float64 array (k,)
    out : int64 array (n,), written
    """
    n, d = points.shape
    k = m2.shape[1]
    for i in range(n):
        best, arg = np.inf, 0
        for c in range(k):
            acc = cc[c]
            for j in range(d):
                acc += points[i, j] * m2[j, c]
            if acc < best:
                best, arg = acc, c
        out[i] = arg


def _input_presence(keys, inputs, wrong, n_with, n_wrong_with):
    """Per key, the inputs holding it and the misclassified ones among them.

    Parameters
    ----------
    keys : int64 array (n,)
        Keys in ``[0, len(n_with))``; negative: no key at that position.
    inputs : int64 array (n,)
        Input of each position, non-decreasing (so an input's positions are consecutive).
    wrong : bool array (n_inputs,)
    n_with, n_wrong_with : int64 arrays (n_keys,), zeroed; written
    """
    last = np.full(n_with.shape[0], -1, np.int64)
    for p in range(keys.shape[0]):
        k = keys[p]
        if k >= 0:
            i = inputs[p]
            if last[k] != i:  # the key's first position in this input
                last[k] = i
                n_with[k] += 1
                if wrong[i]:
                    n_wrong_with[k] += 1


HALF_TABLE = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
"""Every float16 bit pattern's float32 value (256 kB: it stays in the core's cache)."""


def _half_project(bits, table, comps, out):
    """``float32(X) @ comps.T`` for float16 rows ``X`` given as their bits, without the
    float32 copy of ``X``.

    Parameters
    ----------
    bits : uint16 array (n, d)
        ``X.view(np.uint16)``.
    table : float32 array (65536,)
        :data:`HALF_TABLE`.
    comps : float32 array (q, d)
    out : float32 array (n, q), written
        Each entry a float64 sum of the ``d`` products, rounded once.
    """
    n, d = bits.shape
    q = comps.shape[0]
    row = np.empty(d, np.float32)
    for i in range(n):
        for j in range(d):
            row[j] = table[bits[i, j]]
        for k in range(q):
            acc = 0.0
            for j in range(d):
                acc += row[j] * comps[k, j]
            out[i, k] = acc


def _compiled(fn):
    """``fn`` compiled by numba, cached on disk where numba finds a writable place (beside
    the module, else its user-wide cache) and compiled per process where it finds none."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(fn)


pfa_run = _compiled(_pfa_run) if HAVE_NUMBA else _pfa_run
det_run = _compiled(_det_run) if HAVE_NUMBA else None
nearest_centre = _compiled(_nearest_centre) if HAVE_NUMBA else None
input_presence = _compiled(_input_presence) if HAVE_NUMBA else None
half_project = _compiled(_half_project) if HAVE_NUMBA else None


def warm_up() -> None:
    """Load (or compile) :func:`pfa_run` and :func:`half_project` for the argument types
    their callers pass (about 0.1 s from numba's cache): a pipeline calls it on a spare
    thread while it fits."""
    if not HAVE_NUMBA:
        return
    i64, i32 = np.int64, np.int32
    half_project(np.zeros((1, 2), np.uint16), HALF_TABLE, np.zeros((1, 2), np.float32),
                 np.zeros((1, 1), np.float32))
    pfa_run(np.zeros(1, i64), np.array([0, 1], i64), np.full(2, -1, i32),
            np.array([0, 1, 2], i32), np.zeros(2, i32), np.ones(2), 2, 0, 0, 0.0,
            np.zeros((1, 1)), np.zeros((1, 2)), np.zeros(0, i64))
    det_run(np.zeros(1, i64), np.array([0, 1], i64), np.zeros((1, 2), i64), 0, np.zeros(1, i64))
    nearest_centre(np.zeros((1, 1)), np.zeros((1, 1)), np.zeros(1), np.zeros(1, i64))
    input_presence(np.zeros(1, i64), np.zeros(1, i64), np.zeros(1, np.bool_), np.zeros(1, i64),
                   np.zeros(1, i64))
