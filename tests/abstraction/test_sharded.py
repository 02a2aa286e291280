"""Per-shard pieces of the abstraction: quotas, reduced FSM statistics, one shard = whole."""

from __future__ import annotations

import json
from itertools import pairwise

import numpy as np

from stateseer.abstraction import sharded
from stateseer.abstraction.automata.fsm import FSM
from stateseer.core.engine import SerialEngine, tree_reduce
from stateseer.core.traces import SplitTraces


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
    assert total.sums.tobytes() == whole.sums.tobytes()  # fixed point: exact sums
    assert SerialEngine().reduce(sharded.combine_stats, parts).keys.tolist() == \
        whole.keys.tolist()


def test_pieces_cut_mid_input_sum_to_the_shard_bit_for_bit():
    """A cluster cuts a shard into runs of steps that start and end mid-input: each run's
    statistics lack the transition into its first step, which joining it onto the run
    before adds back, so any cuts, summed in order in any tree, give the shard's bits."""
    rng = np.random.default_rng(2)
    tr = _split(rng, 120)
    tr = SplitTraces(**{**vars(tr), "offsets": np.concatenate(
        [[0, 0], tr.offsets[1:-1], [tr.offsets[-1]] * 3])})  # empty inputs first and last
    S, V = 6, 7
    states = rng.integers(1, S, tr.n_steps)
    whole = sharded.path_stats(states, tr, S, V, shard=3)
    for trial in range(20):
        cuts = np.unique(np.r_[0, rng.integers(0, tr.n_steps, trial % 7 + 1), tr.n_steps])
        parts = [sharded.path_stats(states[a:b], tr, S, V, lo=int(a), hi=int(b), shard=3)
                 for a, b in pairwise(cuts)]
        for total in (tree_reduce(sharded.combine_stats, parts),
                      SerialEngine().reduce(sharded.combine_stats, parts)):
            assert total.keys.tobytes() == whole.keys.tobytes()
            assert total.counts.tobytes() == whole.counts.tobytes()
            assert total.sums.tobytes() == whole.sums.tobytes()
            assert total.visits.tolist() == whole.visits.tolist()
            assert total.n_inputs == whole.n_inputs == tr.n_inputs
    # runs of two shards are never joined: their first steps start inputs
    other = sharded.path_stats(states, tr, S, V, shard=4)
    both = sharded.combine_stats(whole, other)
    assert both.counts.sum() == 2 * whole.counts.sum()


def test_patterns_mined_over_shards_equal_the_whole_split_at_any_shard_size(
        tmp_path, text_run, monkeypatch):
    """``abstract`` mines DeepSeer's lists shard by shard (counts merged, then phrases and
    inputs of the chosen ones): the lists are those of the whole-split functions, and the
    same for one shard or many, or one shard cut into pieces of PIECE_STEPS steps (as an
    imported run is) with its n-grams counted a hash bucket at a time (contexts are a
    seeded sample keyed by step number)."""
    import shutil

    from stateseer.abstraction.analysis.patterns import (
        buggy_patterns,
        influential_patterns,
        state_contexts,
        state_ngrams,
    )
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.engine import record_run

    docs, states = [], []
    for size, piece in ((None, None), (97, None), (None, 700)):
        run = tmp_path / f"shards-{size}-{piece}"
        shutil.copytree(text_run, run, ignore=shutil.ignore_patterns("traces*", "abstraction*"))
        record_run(run, shard_size=size)
        traces = Traces(run / "traces")
        assert len(traces.shards("train")) == (1 if size is None else
                                              -(-traces["train"].n_inputs // size))
        if piece:  # pieces, and the n-grams counted in hash buckets
            monkeypatch.setattr(sharded, "PIECE_STEPS", piece)
            monkeypatch.setattr(sharded, "NGRAM_BUCKET_STEPS", piece)
            assert traces["train"].n_steps > 3 * piece  # several pieces
        ab = abstract_run(run, n_states=10, save=False)
        # a run longer than PIECE_STEPS keeps its states in mapped files, removed at the end
        assert isinstance(ab.states["train"], np.memmap) == bool(piece)
        assert not (run / "abstraction.scratch").exists()
        docs.append(json.dumps(ab.patterns))
        states.append([np.asarray(ab.simulated["train"]).tobytes(),
                       np.asarray(ab.states["train"]).tobytes(),
                       json.dumps(ab.fsm.to_dict(transitions=True)["transitions"])])
    assert docs[0] == docs[1] == docs[2]
    assert states[0] == states[2]  # assignment and simulation, cut into pieces
    abstract_run(run, n_states=10)  # saved from the mapped files
    saved = np.load(run / "abstraction" / "train.states.npy")
    assert saved.dtype == np.int32 and saved.astype(np.int64).tobytes() == \
        np.frombuffer(states[0][1], np.asarray(ab.states["train"]).dtype).astype(
            np.int64).tobytes()
    assert not (run / "abstraction.scratch").exists()
    S, tr = ab.fsm.n_states, traces["train"]
    st = np.asarray(ab.states["train"])
    want = {
        "ngrams": state_ngrams(st, tr.offsets, tr.surface_ids, traces.surface, S),
        "contexts": state_contexts(st, tr.offsets, tr.surface_ids, traces.surface, S),
        "influential": influential_patterns(st, tr.offsets, tr.surface_ids, traces.surface,
                                            tr.proba, traces.initial_proba, tr.labels,
                                            tr.predictions, S)}
    for name, lists in want.items():
        assert json.dumps(ab.patterns[name]) == json.dumps(lists), name
    assert ab.patterns["influential"] and any(ab.patterns["contexts"])
    for split in traces.split_names:
        t = traces[split]
        buggy = buggy_patterns(np.asarray(ab.states[split]), t.offsets, t.surface_ids,
                               traces.surface, t.labels, t.predictions, S)
        assert json.dumps(ab.patterns["buggy"][split]) == json.dumps(buggy), split
    assert any(ab.patterns["buggy"].values())


def test_shards_open_from_many_threads_at_once(tmp_path, text_run):
    """The per-process cache of open shards is shared by the pattern, simulation and
    assignment threads of one abstraction: opening more shards than it keeps, from eight
    threads at once, gives every thread its shard (no lost or doubled eviction)."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    from stateseer.core.traces import Traces
    from stateseer.rnn_models.engine import record_run

    run = tmp_path / "many"
    shutil.copytree(text_run, run, ignore=shutil.ignore_patterns("traces*", "abstraction*"))
    record_run(run, shard_size=40)
    refs = sharded.shard_refs(Traces(run / "traces"), "train")
    assert len(refs) > 2 * sharded._OPEN_MAX

    def open_all(seed: int) -> bool:
        order = np.random.default_rng(seed).permutation(len(refs))
        return all(sharded.open_ref(refs[i]).n_steps == refs[i].n_steps
                   for _ in range(3) for i in order)

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(open_all, range(8)))
    assert len(sharded._OPEN) <= sharded._OPEN_MAX


class _PiecesEngine(SerialEngine):
    """The in-process loop, posing as a cluster of ``n_workers``: maps cut shards into
    pieces as a Dask engine does."""

    is_cluster = True

    def __init__(self, n_workers: int) -> None:
        self.n_workers = n_workers


def test_pieces_cover_each_shard_on_chunk_boundaries_and_inputs_in_order():
    ref = sharded.ShardRef("t", "train", 3, 1000, 1230, 40, 57)
    pieces = sharded.step_pieces(ref, 4, 64)  # 230 steps: chunks 0-64-128-192-230
    assert [(lo, hi) for _, lo, hi in pieces] == [(0, 64), (64, 128), (128, 192), (192, 230)]
    assert [(lo, hi) for _, lo, hi in sharded.step_pieces(ref, 2, 64)] == [(0, 128),
                                                                           (128, 230)]
    assert [(lo, hi) for _, lo, hi in sharded.step_pieces(ref, 9, 1000)] == [(0, 230)]
    ins = sharded.input_pieces(ref, 5)
    assert ins[0][1] == 0 and ins[-1][2] == 17
    assert all(a < b and b == c for (_, a, b), (_, c, _) in pairwise(ins))
    assert sharded.pieces_per_shard(SerialEngine(), 1) == 1  # in process: whole shards
    assert sharded.pieces_per_shard(_PiecesEngine(2), 1) == 8
    assert sharded.pieces_per_shard(_PiecesEngine(2), 3) == 3
    assert sharded.pieces_per_shard(_PiecesEngine(2), 40) == 1


def test_predict_of_chunk_aligned_rows_is_the_whole_predict_bit_for_bit():
    from stateseer.abstraction.abstractors.kmeans import KMeansAbstractor

    rng = np.random.default_rng(3)
    tr = _split(rng, 300)
    ab = KMeansAbstractor(n_states=6, chunk_size=32, split_by_prediction=True).fit(
        tr.hidden, proba=tr.proba)
    whole = ab.predict(tr.hidden, tr.proba)
    parts = [ab.predict(tr.hidden, tr.proba, rows=(lo, hi))
             for lo, hi in ((0, 64), (64, 96), (96, tr.n_steps))]
    assert np.concatenate(parts).tobytes() == whole.tobytes()
    import pytest

    from stateseer.abstraction.errors import AbstractionError

    with pytest.raises(AbstractionError, match="not a range"):
        ab.predict(tr.hidden, tr.proba, rows=(10, 5))


def test_a_cluster_cuts_few_shards_into_pieces_with_the_whole_shard_results(tmp_path,
                                                                             text_run):
    """One recorded shard on two (posed) workers runs as eight pieces: states, FSM,
    simulated paths and predictions are those of the whole shard, bit for bit."""
    import shutil

    from stateseer.abstraction.abstractors.kmeans import KMeansAbstractor
    from stateseer.abstraction.pipeline import fit_abstraction
    from stateseer.core.rundir import RunDir
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.engine import record_run

    run = tmp_path / "one"
    shutil.copytree(text_run, run, ignore=shutil.ignore_patterns("traces*", "abstraction*"))
    record_run(run, splits=["train", "test"])
    traces = Traces(run / "traces")
    assert len(traces.shards("train")) == 1
    method = KMeansAbstractor(n_states=8, chunk_size=512, split_by_prediction=True)
    alphabet = RunDir(run).vocab_tokens()
    runs = []
    for engine, spill in ((SerialEngine(), True), (_PiecesEngine(2), True),
                          (_PiecesEngine(3), False)):  # states in files, or sent back
        out = tmp_path / f"{type(engine).__name__}{engine.n_workers}"
        out.mkdir()
        runs.append(fit_abstraction(traces, alphabet, method=method, cluster=engine,
                                    out_dir=out if spill else None))
    assert traces["train"].n_steps > 4 * 512  # so the training split is cut into pieces
    a = runs[0]
    for b in runs[1:]:
        for s in ("train", "test"):
            assert np.asarray(a.states[s]).tobytes() == \
                np.asarray(b.states[s]).astype(np.asarray(a.states[s]).dtype).tobytes()
            assert np.asarray(a.simulated[s]).tobytes() == \
                np.asarray(b.simulated[s]).astype(np.asarray(a.simulated[s]).dtype).tobytes()
            assert a.sim_predictions[s].tobytes() == b.sim_predictions[s].tobytes()
        assert json.dumps(a.fsm.to_dict()) == json.dumps(b.fsm.to_dict())
        assert a.fsm.prediction.tobytes() == b.fsm.prediction.tobytes()


def test_the_fit_sample_carries_each_steps_final_prediction(tmp_path, text_run):
    """fit_sharded hands the abstractor each sampled step's input's final prediction
    (the margin space's value axis reads it): a row of the sample's ``F`` is the
    ``final_proba`` of the input the row's step belongs to."""
    import shutil

    from stateseer.core.traces import Traces
    from stateseer.rnn_models.engine import record_run

    run = tmp_path / "final"
    shutil.copytree(text_run, run, ignore=shutil.ignore_patterns("traces*", "abstraction*"))
    record_run(run, shard_size=40)
    refs = sharded.shard_refs(Traces(run / "traces"), "train")
    tr = sharded.open_ref(refs[1])
    q = min(30, refs[1].n_steps)
    S, P, F = sharded.sample_shard((refs[1], q), random_state=0, final=True)
    assert 0 < len(S) == len(P) == len(F) <= q  # runs of 16 steps
    rows = [int(np.flatnonzero((np.asarray(tr.hidden) == s).all(1))[0]) for s in S[:10]]
    want = np.asarray(tr.final_proba)[np.asarray(tr.step_input)[rows]]
    assert np.allclose(F[:10], want)
    from stateseer.abstraction.abstractors.kmeans import KMeansAbstractor

    seen = {}

    class Spy(KMeansAbstractor):
        def fit(self, X, y=None, proba=None, final_proba=None):
            seen.update(X=X, final=final_proba)
            return super().fit(X, proba=proba, final_proba=final_proba)

    sharded.fit_sharded(Spy(n_states=4, random_state=0), refs, SerialEngine())
    assert seen["final"] is not None and len(seen["final"]) == len(seen["X"])
