"""Fidelity and quality figures of an abstraction (written to ``metrics.json["abstraction"]``).

``label_fidelity``
    Share of inputs whose final abstract state (from the RNN's real hidden state) has a
    label equal to the RNN's final prediction (DESIGN.md).
``simulation_fidelity``
    The same for the state the FSM reaches on the tokens alone, without the RNN.
``simulation_chance`` / ``simulation_kappa``
    Its baselines (:func:`agreement_baseline`): the agreement of an FSM that always
    answers the model's most frequent prediction, and Cohen's kappa (agreement beyond what
    the two answers' class frequencies give by chance).
``state_purity``
    Share of steps whose intermediate prediction equals their state's label.
``state_coverage`` / ``transition_coverage`` / ``edge_coverage``
    DeepStellar's coverage criteria on a split: share of the FSM's states, of its
    (source, token, target) transitions, and of its state-to-state edges that the split's
    paths visit.
``succinctness``
    Distinct state-to-state edges per state (lower reads more easily) and
    ``determinism``: share of (state, token) pairs seen in training with a single target.
``prediction_entropy``
    Entropy (bits) of each state's mean prediction, and its visit-weighted mean.

:func:`bootstrap_ci` gives the 95 % interval written beside a fidelity figure
(``simulation_fidelity_ci``); :func:`choose_knee` picks a state count on a
fidelity-against-states curve under a readability cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stateseer.abstraction.arrays import distinct
from stateseer.abstraction.automata.fsm import FSM, paths_to_transitions
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.defaults import AUTO_CAP

__all__ = ["AUTO_CANDIDATES", "agreement_baseline", "auto_candidates",
           "bootstrap_ci", "choose_knee", "fidelity", "quality", "state_entropy"]

def agreement_baseline(simulated: np.ndarray, predictions: np.ndarray,
                       n_classes: int) -> dict[str, float | None]:
    """What a simulation fidelity is to be read against.

    Parameters
    ----------
    simulated, predictions : ndarray of int of shape (n_inputs,)
        The FSM's answers and the model's.

    Returns
    -------
    dict
        ``chance``: the agreement of an FSM that always answers the model's most frequent
        prediction; ``kappa``: Cohen's kappa of the two (:func:`sklearn.metrics.
        cohen_kappa_score`; None where undefined, i.e. both answer one class throughout).

    Examples
    --------
    >>> rnn = np.array([0, 0, 0, 1, 1, 0, 0, 0])
    >>> out = agreement_baseline(np.zeros(8, int), rnn, 2)
    >>> out["chance"], out["kappa"]
    (0.75, 0.0)
    >>> agreement_baseline(rnn, rnn, 2)["kappa"]
    1.0
    """
    import warnings

    from sklearn.metrics import cohen_kappa_score

    simulated, predictions = np.asarray(simulated), np.asarray(predictions)
    if not len(predictions):
        return {"chance": None, "kappa": None}
    chance = float(np.bincount(predictions, minlength=n_classes).max() / len(predictions))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kappa = float(cohen_kappa_score(predictions, simulated, labels=np.arange(n_classes)))
    return {"chance": round(chance, 4),
            "kappa": round(kappa, 4) if np.isfinite(kappa) else None}


AUTO_CANDIDATES = (4, 8, 12, 16, 24, 32, 40, 60, 80, 100)
"""The state counts ``--states auto`` tries (those up to its cap, and the cap itself)."""


def auto_candidates(cap: int, *, min_states: int = 1,
                    candidates: Sequence[int] | None = None) -> list[int]:
    """The counts ``--states auto`` tries: ``candidates`` (default :data:`AUTO_CANDIDATES`)
    within ``[min_states, cap]``, plus ``cap`` itself, ascending.

    ``min_states`` is the number of predicted classes when every state keeps to one class:
    fewer states cannot work, so they are not tried.

    Raises
    ------
    AbstractionError
        ``cap`` is not a positive integer, or is below ``min_states`` (before any work).

    Examples
    --------
    >>> auto_candidates(40, min_states=6)
    [8, 12, 16, 24, 32, 40]
    >>> auto_candidates(5, candidates=(2, 3, 6, 50))
    [2, 3, 5]
    """
    if not isinstance(cap, (int, np.integer)) or isinstance(cap, bool) or cap < 1:
        raise AbstractionError(f"the state cap must be a positive integer, not {cap!r}")
    if cap < min_states:
        raise AbstractionError(f"--auto-cap {cap} is below the {min_states} predicted classes "
                               f"that each need a state of their own; pass --auto-cap "
                               f"{min_states} or more")
    pool = AUTO_CANDIDATES if candidates is None else candidates
    return sorted({int(c) for c in pool if min_states <= c <= cap} | {int(cap)})


def fidelity(fsm: FSM, final_states: np.ndarray, predictions: np.ndarray) -> float:
    """Share of inputs whose final state's label equals the RNN's prediction."""
    if len(predictions) == 0:
        return float("nan")
    return float((fsm.labels[np.asarray(final_states)] == np.asarray(predictions)).mean())


def state_entropy(fsm: FSM) -> np.ndarray:
    """Entropy in bits of every state's mean prediction, shape (n_states,)."""
    p = np.clip(fsm.prediction, 1e-12, 1.0)
    return -(p * np.log2(p)).sum(axis=1)


def quality(
    fsm: FSM,
    states: np.ndarray,
    offsets: np.ndarray,
    token_ids: np.ndarray,
    proba: np.ndarray,
) -> dict[str, Any]:
    """Purity, coverage, succinctness and entropy of ``fsm`` on one split's paths.

    Parameters
    ----------
    states : ndarray of shape (n_steps,)
        FSM states (abstract state + 1) of the split's steps.
    offsets : ndarray of shape (n_inputs + 1,)
    token_ids : ndarray of shape (n_steps,)
    proba : ndarray of shape (n_steps, n_classes)
    """
    states = np.asarray(states, dtype=np.int64)
    S = fsm.n_states
    step_pred = np.asarray(proba).argmax(axis=1) if len(states) else np.zeros(0, np.int64)
    purity = float((fsm.labels[states] == step_pred).mean()) if len(states) else float("nan")
    visited = np.zeros(S, bool)
    visited[states] = True
    visited[fsm.initial] = len(offsets) > 1
    src, tok, dst, _ = paths_to_transitions(states, offsets, token_ids, S, len(fsm.alphabet))
    V = len(fsm.alphabet)
    model_keys = (fsm.source * V + fsm.token) * S + fsm.target
    split_keys = (src * V + tok) * S + dst
    covered = np.isin(model_keys, split_keys)
    model_edges = distinct(fsm.source * S + fsm.target)
    split_edges = distinct(src * S + dst)
    first = np.ones(fsm.n_transitions, bool)
    first[1:] = (fsm.source[1:] != fsm.source[:-1]) | (fsm.token[1:] != fsm.token[:-1])
    n_pairs = int(first.sum())
    ent = state_entropy(fsm)
    w = fsm.visits / max(fsm.visits.sum(), 1)
    return {
        "state_purity": purity,
        "state_coverage": float(visited.mean()),
        "transition_coverage": float(covered.mean()) if len(covered) else float("nan"),
        "edge_coverage": float(np.isin(model_edges, split_edges).mean())
        if len(model_edges) else float("nan"),
        "succinctness": float(len(model_edges) / S),
        "determinism": float((np.diff(np.flatnonzero(np.append(first, True))) == 1).mean())
        if n_pairs else float("nan"),
        "n_transitions": int(fsm.n_transitions),
        "n_edges": len(model_edges),
        "prediction_entropy": [round(float(e), 4) for e in ent],
        "mean_prediction_entropy": float((w * ent).sum()),
    }


def bootstrap_ci(agree: np.ndarray, *, level: float = 0.95, n_boot: int = 4000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of a 0/1 agreement vector.

    Resampling ``n`` inputs with replacement from a vector holding ``k`` ones gives a
    count of ones distributed Binomial(n, k/n), so the bootstrap distribution is drawn
    exactly and cheaply, whatever ``n``.

    Parameters
    ----------
    agree : ndarray of bool of shape (n_inputs,)
    level : float
        Coverage of the interval.
    n_boot : int
        Bootstrap resamples.
    seed : int

    Returns
    -------
    (low, high) : tuple of float
        NaN for an empty vector.

    Examples
    --------
    >>> lo, hi = bootstrap_ci(np.r_[np.ones(80, bool), np.zeros(20, bool)])
    >>> lo < 0.8 < hi
    True
    """
    agree = np.asarray(agree, bool).ravel()
    n = len(agree)
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = rng.binomial(n, agree.mean(), size=n_boot) / n
    tail = (1.0 - level) / 2
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def choose_knee(points: Sequence[dict[str, Any]], *, cap: int = AUTO_CAP,
                key: str = "simulation_fidelity", flat: float = 0.005) -> tuple[int, str]:
    """The knee of a fidelity-against-states curve, never above ``cap``.

    Kneedle (Satopää et al., 2011): both axes scaled to [0, 1], the knee is the point
    furthest above the chord, i.e. where ``y - x`` is largest. A curve whose range is below
    ``flat`` gives the fewest states.

    Parameters
    ----------
    points : sequence of dict
        With ``n_states`` and ``key``.
    cap : int
        Readability cap: candidates above it are ignored.

    Returns
    -------
    n_states : int
    reason : str
        One line saying why.

    Examples
    --------
    >>> pts = [{"n_states": k, "simulation_fidelity": y}
    ...        for k, y in [(4, 0.6), (8, 0.8), (20, 0.82), (40, 0.83), (100, 0.9)]]
    >>> choose_knee(pts)[0]
    8
    """
    pts = sorted((p for p in points if p["n_states"] <= cap), key=lambda p: p["n_states"])
    if not pts:
        raise AbstractionError(f"no candidate state count is within the cap of {cap}; pass "
                               "smaller counts or a larger cap")
    x = np.array([p["n_states"] for p in pts], float)
    y = np.array([p[key] for p in pts], float)
    best = int(np.nanargmax(y))
    span = f"{int(x[0])}–{int(x[-1])}"
    if len(pts) == 1 or np.nanmax(y) - np.nanmin(y) < flat:
        k = int(x[0])
        return k, (f"{k} states: the fidelity curve over {span} states is flat (range "
                   f"{np.nanmax(y) - np.nanmin(y):.3f}), so the fewest states "
                   f"(cap {cap} for a readable diagram)")
    xn = (x - x[0]) / (x[-1] - x[0])
    yn = (y - np.nanmin(y)) / (np.nanmax(y) - np.nanmin(y))
    i = int(np.nanargmax(yn - xn))
    k = int(x[i])
    return k, (f"{k} states: the knee of the fidelity curve over {span} states ({y[i]:.3f} "
               f"at {k}; best {y[best]:.3f} at {int(x[best])}; cap {cap} for a readable "
               "diagram)")
