"""Per-shard pieces of the abstraction: quotas, reduced FSM statistics, one shard = whole."""

from __future__ import annotations

import json

import numpy as np

from abstraction import sharded
from abstraction.fsm import FSM
from rnn_models.formats.engine import SerialEngine, tree_reduce
from rnn_models.formats.traces import SplitTraces


def _split(rng: np.random.Generator, n_inputs: int, V: int = 7, C: int = 3) -> SplitTraces:
    lengths = rng.integers(0, 9, n_inputs)
    n = int(lengths.sum())
    proba = rng.dirichlet(np.ones(C), n).astype(np.float32)
    return SplitTraces(name="train", hidden=rng.normal(size=(n, 4)).astype(np.float32),
                       proba=proba, token_ids=rng.integers(0, V, n).astype(np.int32),
                       surface_ids=np.zeros(n, np.int32),
                       offsets=np.concatenate([[0], np.cumsum(lengths)]),
                       labels=np.zeros(n_inputs, np.int64),
                       final_proba=np.zeros((n_inputs, C), np.float32),
                       rows=np.arange(n_inputs), surface=["x"])


def test_quotas_take_everything_when_small_and_share_by_length_when_large():
    assert sharded.fit_quotas([5, 0, 7], 100).tolist() == [5, 0, 7]
    q = sharded.fit_quotas([1000, 3000, 1], 400)
    assert q.sum() == 400 and q.tolist() == [100, 300, 0]
    q = sharded.fit_quotas([10, 10, 10], 20)  # largest remainder, earlier shard first
    assert q.tolist() == [7, 7, 6]


def test_one_shard_statistics_give_from_paths_fsm_exactly():
    rng = np.random.default_rng(0)
    tr = _split(rng, 60)
    S, V = 6, 7
    states = rng.integers(1, S, tr.n_steps)
    stats = sharded.path_stats(states, tr, S, V)
    kw = {"n_states": S - 1, "classes": ["a", "b", "c"], "alphabet": list("abcdefg"),
          "fallback": "stay"}
    a = sharded.fsm_from_stats(stats, np.ones(3) / 3, **kw)
    b = FSM.from_paths(states - 1, tr.offsets, tr.token_ids, tr.proba, np.ones(3) / 3, **kw)
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def test_shard_statistics_sum_to_the_whole_split():
    rng = np.random.default_rng(1)
    tr = _split(rng, 90)
    S, V = 5, 7
    states = rng.integers(1, S, tr.n_steps)
    whole = sharded.path_stats(states, tr, S, V)
    parts = []
    for lo, hi in ((0, 30), (30, 31), (31, 90)):
        a, b = int(tr.offsets[lo]), int(tr.offsets[hi])
        sub = SplitTraces(name="train", hidden=tr.hidden[a:b], proba=tr.proba[a:b],
                          token_ids=tr.token_ids[a:b], surface_ids=tr.surface_ids[a:b],
                          offsets=tr.offsets[lo:hi + 1] - a, labels=tr.labels[lo:hi],
                          final_proba=tr.final_proba[lo:hi], rows=tr.rows[lo:hi],
                          surface=tr.surface)
        parts.append(sharded.path_stats(states[a:b], sub, S, V))
    total = tree_reduce(sharded.combine_stats, parts)
    assert total.keys.tolist() == whole.keys.tolist()
    assert total.counts.tolist() == whole.counts.tolist()
    assert total.visits.tolist() == whole.visits.tolist() and total.n_inputs == 90
    np.testing.assert_allclose(total.sums, whole.sums, rtol=1e-12)
    assert SerialEngine().reduce(sharded.combine_stats, parts).keys.tolist() == \
        whole.keys.tolist()
