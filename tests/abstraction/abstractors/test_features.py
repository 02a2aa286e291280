"""The margin space the FSM's states live in: one residual axis per logit difference, the
logit differences weighted by MARGIN_WEIGHT (stateseer.abstraction.abstractors.features)."""

from __future__ import annotations

import numpy as np
import pytest

from stateseer.abstraction.abstractors.features import MARGIN_WEIGHT, Projection, log_ratios
from stateseer.abstraction.abstractors.kmeans import KMeansAbstractor
from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.errors import AbstractionError


def _states(n: int, d: int, n_classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Hidden states (n, d) and the softmax of a linear head on them (n, C)."""
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(n, d)).astype(np.float32) * np.linspace(3, 0.5, d).astype(np.float32)
    W = rng.normal(size=(d, n_classes))
    logits = S @ W
    P = np.exp(logits - logits.max(1, keepdims=True))
    return S, P / P.sum(1, keepdims=True)


@pytest.mark.parametrize("n_classes", [2, 3, 4])
def test_one_residual_axis_per_logit_difference(n_classes):
    S, P = _states(600, 12, n_classes)
    proj = Projection.fit("margin", S, P, 1, 0)
    Z = proj.transform(S, P)
    C1 = n_classes - 1
    assert Z.shape == (600, 2 * C1)
    # the logit differences lead, in the classifier's own order, weighted by MARGIN_WEIGHT
    L = log_ratios(P)
    assert np.allclose(Z[:, :C1] * L.std(0) / MARGIN_WEIGHT, L, atol=1e-3)
    assert Z.std(0) == pytest.approx([MARGIN_WEIGHT] * C1 + [1.0] * C1, abs=1e-3)
    # the residual axes are orthogonal to the head's directions
    comps = proj.arrays["components"]
    head = proj.arrays["head"]
    assert np.abs(comps @ head.T).max() < 1e-4
    assert Projection.fit("margin", S, P, 2, 0).n_components == 3 * C1


@pytest.mark.parametrize("n_classes", [2, 3])
def test_the_residual_pca_from_the_gram_matrix_is_pca_of_the_residuals(n_classes):
    from sklearn.decomposition import PCA

    S, P = _states(800, 10, n_classes, seed=3)
    proj = Projection.fit("margin", S, P, 2, 0)
    Q, _ = np.linalg.qr(proj.arrays["head"].T)
    R = S.astype(np.float64) - (S @ Q) @ Q.T
    pca = PCA(n_components=2 * (n_classes - 1), svd_solver="covariance_eigh").fit(R)
    assert np.allclose(proj.arrays["mean"], pca.mean_, atol=1e-10)
    assert np.allclose(proj.arrays["components"], pca.components_, atol=1e-8)


def test_margin_weight_is_a_parameter_and_must_be_positive():
    S, P = _states(300, 8, 2)
    Z = Projection.fit("margin", S, P, 1, 0, margin_weight=2.0).transform(S, P)
    assert Z.std(0) == pytest.approx([2.0, 1.0], abs=1e-3)
    with pytest.raises(AbstractionError, match="margin_weight must be positive") as e:
        Projection.fit("margin", S, P, 1, 0, margin_weight=0.0)
    assert "\n" not in str(e.value)


def test_the_residual_axes_are_capped_by_the_state_size():
    S, P = _states(200, 4, 3)  # 2 logit differences leave 2 residual directions
    assert Projection.fit("margin", S, P, 5, 0).n_components == 2 + 2


def _memory_task(n_inputs: int, seed: int):
    """A recurrent process whose prediction needs a memory the head does not read.

    Token 0 flips a hidden sign u (a direction orthogonal to the head), token 1 moves
    the margin m by u, token 2 decays m. The classifier reads only m."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 14, n_inputs)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.choice(3, size=int(offsets[-1]), p=[0.25, 0.5, 0.25])
    H = np.zeros((len(tokens), 6), np.float32)
    noise = rng.normal(0, 0.05, (len(tokens), 6))
    for i in range(n_inputs):
        m, u = 0.0, 1.0
        for t in range(offsets[i], offsets[i + 1]):
            if tokens[t] == 0:
                u = -u
            elif tokens[t] == 1:
                m = np.clip(m + u, -3, 3)
            else:
                m *= 0.5
            H[t, :2] = m, u
        H[offsets[i]:offsets[i + 1]] += noise[offsets[i]:offsets[i + 1]]
    p1 = 1 / (1 + np.exp(-2 * H[:, 0]))
    return H, np.stack([1 - p1, p1], 1), tokens, offsets


def test_the_fsm_alone_follows_a_memory_the_head_does_not_read():
    """With the residual axis the FSM knows u and simulates the process; without it (the
    margin alone) it cannot tell which way token 1 moves."""
    H, P, tok, off = _memory_task(600, 0)
    _, Pt, tokt, offt = _memory_task(300, 1)
    final = offt[1:] - 1
    rnn = Pt[final].argmax(1)

    def simulated(residual: int) -> float:
        ab = KMeansAbstractor(n_states=16, split_by_prediction=True,
                              residual_components=residual).fit(H, proba=P)
        fsm = FSM.from_paths(ab.labels_, off, tok, P, np.array([0.5, 0.5]),
                             n_states=ab.n_states_, classes=["neg", "pos"],
                             alphabet=["flip", "go", "decay"],
                             coords=np.vstack([ab.transform(np.zeros((1, 6), np.float32),
                                                            np.array([[0.5, 0.5]])),
                                               ab.cluster_centers_]),
                             simulation="probabilistic")
        _, pred = fsm.simulate_predictions(tokt, offt)
        return float((pred == rnn).mean())

    with_memory, margin_only = simulated(1), simulated(0)
    assert with_memory >= 0.9
    assert with_memory >= margin_only + 0.1


def test_predict_on_two_threads_equals_one(monkeypatch):
    S, P = _states(5000, 12, 3, seed=5)
    ab = KMeansAbstractor(n_states=9, chunk_size=256, random_state=0).fit(S, proba=P)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = ab.predict(S, P)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the suite runs with 1
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    two = ab.predict(S, P)
    assert np.array_equal(one, two) and len(np.unique(two)) > 1


def test_a_value_axis_finds_the_state_direction_that_predicts_the_final_answer():
    """The head reads axis 0 now; the input's final logit is decided by axis 1, a memory
    the head does not read yet and the largest residual variance does not point at
    (axes 2-3 vary more). With the final predictions, the first residual component is
    that direction; without them the space is the variance one, as before."""
    rng = np.random.default_rng(0)
    n, d = 2000, 6
    S = rng.normal(size=(n, d)) * np.array([1.0, 0.5, 3.0, 2.5, 0.3, 0.2])
    now = 2.0 * S[:, 0]
    final = 4.0 * S[:, 1] + 0.1 * rng.normal(size=n)

    def proba(z):
        return np.column_stack([1 / (1 + np.exp(z)), 1 / (1 + np.exp(-z))])

    S = S.astype(np.float32)
    plain = Projection.fit("margin", S, proba(now), 1, 0)
    valued = Projection.fit("margin", S, proba(now), 1, 0, final=proba(final))
    comps = valued.arrays["components"]
    assert comps.shape == (2, d)  # the value axis, then the residual one
    assert abs(comps[0, 1]) > 0.99  # axis 1: what the state holds of the answer to come
    assert abs(plain.arrays["components"][0, 2]) > 0.9  # without it: the largest variance
    assert abs(comps[1] @ comps[0]) < 1e-6 and abs(comps[1] @ valued.arrays["head"][0]) < 1e-3
    Z = valued.transform(S, proba(now))
    assert abs(np.corrcoef(Z[:, 1], final)[0, 1]) > 0.99


def test_a_final_answer_the_state_does_not_predict_gets_no_value_axis():
    """A constant final prediction (or one unrelated to the state) adds no axis of rounding
    noise: the space is the one fitted without final predictions."""
    S, P = _states(600, 8, 2, seed=4)
    plain = Projection.fit("margin", S, P, 1, 0)
    const = Projection.fit("margin", S, P, 1, 0, final=np.tile([[0.3, 0.7]], (600, 1)))
    assert const.arrays["components"].shape == plain.arrays["components"].shape
    assert np.allclose(const.arrays["components"], plain.arrays["components"])
    noise = np.random.default_rng(9).dirichlet([1, 1], 600)
    unrelated = Projection.fit("margin", S, P, 1, 0, final=noise)
    assert unrelated.arrays["components"].shape[0] <= 2


def test_predictions_must_have_one_row_per_step():
    """final_proba of a split is one row per input: passed as it is, one line names it."""
    S, P = _states(200, 6, 2)
    with pytest.raises(AbstractionError, match="final_proba has 20 rows for 200 hidden") as e:
        KMeansAbstractor(n_states=4, random_state=0).fit(S, proba=P, final_proba=P[:20])
    assert "\n" not in str(e.value)
