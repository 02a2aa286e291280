"""Wei et al.'s weighted automaton of an RNN for natural language: the published baseline
of simulation fidelity (ICFEM 2022 / JLAMP 2023, weizeming/Extract_WFA_from_RNN_for_NL).

The protocol, as its code does it:

1. the states are ``k`` k-means clusters of the *intermediate predictions* (the softmax
   after every token of the training inputs), plus an initial state whose weight is the
   uniform distribution; a state's weight is its cluster centre;
2. per token ``a``, the transitions counted in training, ``count[a, p, q]``;
3. *weighted filling*: a row ``p`` that token ``a`` never left is the other rows of
   ``count[a]`` weighted by ``exp(-||w_p - w_q||²)``, normalised, times ``beta``, plus
   ``1 - beta`` on the diagonal; rows that were seen are their frequencies;
4. *linear regularisation* toward the identity: ``(1 - alpha) M + alpha I``;
5. a token never seen in training is the identity;
6. an input runs a state *distribution* from the initial state, ``pi <- pi M[a]``, and the
   prediction is the argmax of ``pi W`` (``W``: the state weights); fidelity is the share
   of inputs where it equals the RNN's prediction.

Here it is vectorised (no Python loop over tokens or states: the counts by ``np.add.at``,
the filling by one ``einsum``, the run over all inputs at once position by position).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> proba = rng.dirichlet([1, 1], 200)
>>> tokens = rng.integers(0, 5, 200)
>>> offsets = np.arange(0, 201, 10)
>>> wfa = WeightedAutomaton(n_states=4, random_state=0).fit(proba, tokens, offsets)
>>> wfa.predict(tokens, offsets).shape, wfa.matrices_.shape
((20,), (6, 5, 5))
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.cluster import KMeans

from stateseer.core.defaults import N_STATES

__all__ = ["WeightedAutomaton"]


class WeightedAutomaton(BaseEstimator):
    """Wei et al.'s weighted automaton (see the module notes), scikit-learn style.

    Parameters
    ----------
    n_states : int
        Clusters ``k`` (the automaton has ``k + 1`` states with the initial one).
    beta : float
        Weight of the filled-in rows against staying put.
    alpha : float
        Pull toward the identity.
    random_state : int

    Attributes
    ----------
    weights_ : ndarray of shape (k + 1, n_classes)
        Each state's prediction (the initial state's uniform).
    tokens_ : ndarray of int
        Token ids seen in training; ``matrices_[i]`` is token ``tokens_[i]``'s.
    matrices_ : ndarray of shape (len(tokens_) + 1, k + 1, k + 1)
        Transition matrices; the last is the identity (any unseen token).
    """

    def __init__(self, n_states: int = N_STATES, *, beta: float = 0.3, alpha: float = 0.4,
                 random_state: int = 0) -> None:
        self.n_states = n_states
        self.beta = beta
        self.alpha = alpha
        self.random_state = random_state

    def fit(self, proba: np.ndarray, token_ids: np.ndarray, offsets: np.ndarray
            ) -> WeightedAutomaton:
        """Fit on the training steps.

        Parameters
        ----------
        proba : ndarray of shape (n_steps, n_classes)
            The intermediate predictions after every token.
        token_ids : ndarray of shape (n_steps,)
        offsets : ndarray of shape (n_inputs + 1,)
            Where each input's steps start (and the end).
        """
        proba = np.asarray(proba, np.float64)
        token_ids, offsets = np.asarray(token_ids), np.asarray(offsets)
        km = KMeans(self.n_states, max_iter=500, n_init="auto",
                    random_state=self.random_state).fit(proba)
        n_classes = proba.shape[1]
        self.weights_ = np.vstack([np.full(n_classes, 1 / n_classes), km.cluster_centers_])
        S = len(self.weights_)
        q = km.labels_ + 1
        first = np.zeros(len(q), bool)
        first[offsets[:-1][np.diff(offsets) > 0]] = True
        p = np.where(first, 0, np.roll(q, 1))
        self.tokens_, a = np.unique(token_ids, return_inverse=True)
        count = np.zeros((len(self.tokens_), S, S))
        np.add.at(count, (a, p, q), 1.0)
        diff = self.weights_[:, None, :] - self.weights_[None, :, :]
        near = np.exp(-(diff ** 2).sum(-1))  # (S, S): 1 / exp(squared distance)
        rows = count.sum(2, keepdims=True)
        fill = np.einsum("ip,apq->aiq", near, count)
        fill /= fill.sum(2, keepdims=True)
        eye = np.eye(S)
        m = np.where(rows > 0, count / np.where(rows > 0, rows, 1),
                     self.beta * fill + (1 - self.beta) * eye)
        m = (1 - self.alpha) * m + self.alpha * eye
        self.matrices_ = np.concatenate([m, eye[None]])
        return self

    def predict(self, token_ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The class each input ends in (``-1`` for a zero distribution).

        Returns
        -------
        ndarray of int of shape (n_inputs,)
        """
        token_ids, offsets = np.asarray(token_ids), np.asarray(offsets)
        lengths = np.diff(offsets)
        n, S = len(lengths), len(self.weights_)
        pos = np.searchsorted(self.tokens_, token_ids)
        pos = np.minimum(pos, len(self.tokens_) - 1)
        idx = np.where(self.tokens_[pos] == token_ids, pos, len(self.tokens_))  # unseen: I
        pi = np.zeros((n, S))
        pi[:, 0] = 1.0
        for t in range(int(lengths.max()) if n else 0):  # one step of every input at once
            live = np.flatnonzero(lengths > t)
            mats = self.matrices_[idx[offsets[live] + t]]
            pi[live] = np.einsum("bs,bst->bt", pi[live], mats)
        scores = pi @ self.weights_
        return np.where(scores.sum(1) > 0, scores.argmax(1), -1)
