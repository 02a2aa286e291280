"""Fidelity and quality figures of an abstraction (written to ``metrics.json["abstraction"]``).

``label_fidelity``
    Share of inputs whose final abstract state (from the RNN's real hidden state) has a
    label equal to the RNN's final prediction (DESIGN.md).
``simulation_fidelity``
    The same for the state the FSM reaches on the tokens alone, without the RNN.
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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .fsm import FSM, paths_to_transitions

__all__ = ["fidelity", "quality", "state_entropy"]


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
    model_edges = np.unique(fsm.source * S + fsm.target)
    split_edges = np.unique(src * S + dst)
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
