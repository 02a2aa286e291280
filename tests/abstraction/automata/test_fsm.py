"""The FSM: counting from paths, simulation and fallbacks, exchange format, graph views."""

from __future__ import annotations

import io
import json

import networkx as nx
import numpy as np
import pytest

import stateseer.abstraction.automata.fsm as fsm_module
from stateseer.abstraction.automata.fsm import FALLBACKS, FSM, paths_to_transitions
from stateseer.abstraction.errors import AbstractionError
from tests.conftest import one_line

# ----------------------------------------------------------------------------- example A
# Five inputs over the alphabet a, b, c; abstract states 0/1 (FSM ids 1/2, 0 = initial):
#   input 0: a b   -> abstract 0 1  -> FSM 1 2
#   input 1: a a   -> 0 0           -> 1 1
#   input 2: a     -> 1             -> 2
#   input 3: (empty)
#   input 4: b c   -> 1 1           -> 2 2
# Transitions (source, token, target): (0,a,1) x2, (0,a,2), (0,b,2), (1,a,1), (1,b,2), (2,c,2).
# P(pos) per step: 0.2 0.9 | 0.4 0.55 | 0.8 | - | 0.7 0.6
#   state 1 holds steps 0, 2, 3: mean P(pos) = (0.2 + 0.4 + 0.55) / 3 -> label neg
#   state 2 holds steps 1, 4, 5, 6: mean P(pos) = 0.75 -> label pos
#   the initial state gets head(h0) = [0.6, 0.4] -> label neg
ALPHABET_A = ["a", "b", "c"]
OFFSETS_A = np.array([0, 2, 4, 5, 5, 7])
TOKENS_A = np.array([0, 1, 0, 0, 0, 1, 2])
STATES_A = np.array([0, 1, 0, 0, 1, 1, 1])
P_POS_A = np.array([0.2, 0.9, 0.4, 0.55, 0.8, 0.7, 0.6])
COORDS_A = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 0.0]])
TRIPLES_A = [(0, "a", 1, 2), (0, "a", 2, 1), (0, "b", 2, 1), (1, "a", 1, 1), (1, "b", 2, 1),
             (2, "c", 2, 1)]


def example_a(fallback: str = "stay", coords: np.ndarray | None = COORDS_A) -> FSM:
    proba = np.stack([1 - P_POS_A, P_POS_A], axis=1)
    return FSM.from_paths(STATES_A, OFFSETS_A, TOKENS_A, proba, np.array([0.6, 0.4]),
                          n_states=2, classes=["neg", "pos"], alphabet=ALPHABET_A,
                          coords=coords, fallback=fallback, info={"seed": 0})


def triples(fsm: FSM) -> list[tuple[int, str, int, int]]:
    return [(int(s), fsm.alphabet[int(t)], int(d), int(c))
            for s, t, d, c in zip(fsm.source, fsm.token, fsm.target, fsm.count, strict=True)]


def make_fsm(trs, n_states: int, alphabet: list[str], *, coords=None, fallback="stay") -> FSM:
    """An FSM straight from (source, token, target, count) tuples, sorted as documented."""
    idx = {t: i for i, t in enumerate(alphabet)}
    src = np.array([s for s, _, _, _ in trs], np.int64)
    tok = np.array([idx[t] for _, t, _, _ in trs], np.int64)
    dst = np.array([d for _, _, d, _ in trs], np.int64)
    cnt = np.array([c for _, _, _, c in trs], np.int64)
    order = np.lexsort((dst, -cnt, tok, src))
    pred = np.tile([0.5, 0.5], (n_states, 1))
    return FSM(classes=["neg", "pos"], alphabet=alphabet, visits=np.ones(n_states, np.int64),
               prediction=pred, source=src[order], token=tok[order], target=dst[order],
               count=cnt[order], coords=coords, fallback=fallback)


# ----------------------------------------------------------------------------- construction
def test_from_paths_counts_visits_predictions_and_transitions():
    fsm = example_a()
    assert fsm.n_states == 3 and fsm.n_transitions == 6
    assert fsm.visits.tolist() == [5, 3, 4]  # initial state: one visit per input
    np.testing.assert_allclose(fsm.prediction[0], [0.6, 0.4])
    np.testing.assert_allclose(fsm.prediction[1, 1], (0.2 + 0.4 + 0.55) / 3)
    np.testing.assert_allclose(fsm.prediction[2, 1], 0.75)
    np.testing.assert_allclose(fsm.prediction.sum(1), 1.0)
    assert fsm.labels.tolist() == [0, 0, 1]
    assert triples(fsm) == TRIPLES_A  # sorted by source, token, then descending count
    assert fsm.info == {"seed": 0}


def test_unvisited_state_gets_a_uniform_prediction():
    proba = np.stack([1 - P_POS_A, P_POS_A], axis=1)
    fsm = FSM.from_paths(STATES_A, OFFSETS_A, TOKENS_A, proba, np.array([0.6, 0.4]),
                         n_states=4, classes=["neg", "pos"], alphabet=ALPHABET_A,
                         fallback="stay")
    assert fsm.n_states == 5 and fsm.visits.tolist() == [5, 3, 4, 0, 0]
    np.testing.assert_allclose(fsm.prediction[3:], 0.5)


def test_paths_to_transitions_restarts_every_input_at_the_initial_state():
    # Two inputs "x x" and "x": the second starts from 0 even though the first ended in 2.
    src, tok, dst, cnt = paths_to_transitions(np.array([1, 2, 1]), np.array([0, 2, 3]),
                                              np.array([0, 0, 0]), 3, 1)
    assert list(zip(src.tolist(), tok.tolist(), dst.tolist(), cnt.tolist(), strict=True)) == [
        (0, 0, 1, 2), (1, 0, 2, 1)]
    empty = paths_to_transitions(np.zeros(0), np.array([0, 0]), np.zeros(0), 1, 1)
    assert all(len(a) == 0 for a in empty)


def test_unknown_fallback_is_refused():
    with pytest.raises(AbstractionError, match=r"choose one of: .*nearest, token, stay") as e:
        example_a(fallback="random")
    one_line(e.value)


# ----------------------------------------------------------------------------- simulation
def test_delta_takes_the_most_frequent_target_and_stays_otherwise():
    fsm = example_a("stay")
    # rows: states 0..2; columns: a, b, c
    assert fsm.delta.tolist() == [[1, 2, 0], [1, 2, 1], [2, 2, 2]]


def test_delta_breaks_count_ties_towards_the_lowest_target():
    fsm = make_fsm([(0, "x", 2, 3), (0, "x", 1, 3), (0, "x", 3, 1)], 4, ["x"])
    assert fsm.delta[0, 0] == 1


# Example B: four states, tokens x, y, z (z never seen), centroids on a line.
TRIPLES_B = [(0, "x", 1, 5), (0, "x", 2, 2), (1, "x", 2, 1), (3, "x", 3, 1), (3, "y", 1, 1),
             (3, "y", 0, 1)]
COORDS_B = np.array([[0.0, 0.0], [10.0, 0.0], [9.0, 0.0], [20.0, 0.0]])


@pytest.mark.parametrize(("fallback", "table"), [
    # stay: unseen pairs keep the state
    ("stay", [[1, 0, 0], [2, 1, 1], [2, 2, 2], [3, 0, 3]]),
    # token: x -> 1 overall (5 of 9), y -> 0 (tie 0/1 at one each: lowest id)
    ("token", [[1, 0, 0], [2, 0, 1], [1, 0, 2], [3, 0, 3]]),
    # nearest: state 2's nearest is 1 (x -> 2); y is only known to state 3 (y -> 0)
    ("nearest", [[1, 0, 0], [2, 0, 1], [2, 0, 2], [3, 0, 3]]),
])
def test_fallbacks_fill_unseen_pairs_as_documented(fallback, table):
    fsm = make_fsm(TRIPLES_B, 4, ["x", "y", "z"], coords=COORDS_B, fallback=fallback)
    assert fsm.delta.tolist() == table


@pytest.mark.parametrize("fallback", ["nearest", "displacement"])
def test_geometric_fallbacks_need_coordinates(fallback):
    fsm = make_fsm(TRIPLES_B, 4, ["x", "y", "z"], fallback=fallback)
    with pytest.raises(AbstractionError, match="coords") as e:
        _ = fsm.delta
    one_line(e.value)


def test_displacement_fallback_moves_like_the_token_moves_its_neighbours():
    # States on a line at 0, 0, 1, 2, 3 (state 0 is the initial one); "x" moves one step right
    # from 1 and from 2. State 3 never saw "x": moved by about +1 it lands on state 4, where
    # the nearest state that saw "x" (state 2) would have sent it back to 3.
    coords = np.array([[0.0], [0.0], [1.0], [2.0], [3.0]])
    trs = [(0, "x", 1, 1), (1, "x", 2, 4), (2, "x", 3, 4)]
    moved = make_fsm(trs, 5, ["x"], coords=coords, fallback="displacement")
    near = make_fsm(trs, 5, ["x"], coords=coords, fallback="nearest")
    assert moved.delta[:3, 0].tolist() == near.delta[:3, 0].tolist() == [1, 2, 3]  # seen
    assert moved.delta[3, 0] == 4
    assert near.delta[3, 0] == 3
    assert moved.run(["x"] * 5) == [0, 1, 2, 3, 4, 4]


def test_nearest_fallback_prefers_a_state_at_the_same_position():
    coords = np.array([[50.0, 0.0], [0.0, 0.0], [0.0, 0.0], [3.0, 0.0]])
    fsm = make_fsm([(1, "x", 1, 1), (3, "x", 0, 1)], 4, ["x"], coords=coords,
                   fallback="nearest")
    assert fsm.delta[2, 0] == 1  # state 1 sits exactly where state 2 is


@pytest.mark.parametrize("fallback", FALLBACKS)
def test_step_reset_run_agree_with_vectorised_simulate(fallback):
    fsm = example_a(fallback)
    rng = np.random.default_rng(0)
    words = ["a", "b", "c", "zzz"]
    inputs = [list(rng.choice(words, size=int(n))) for n in rng.integers(0, 9, 40)]
    inputs[3] = []
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in inputs])])
    ids = np.concatenate([fsm.encode(t) for t in inputs])
    assert (ids == -1).sum() == sum(t.count("zzz") for t in inputs)
    sim = fsm.simulate(ids, offsets)
    for i, toks in enumerate(inputs):
        path = fsm.run(toks)
        assert path[0] == fsm.initial and len(path) == len(toks) + 1
        assert path[1:] == sim[offsets[i]:offsets[i + 1]].tolist()
        fsm.reset()
        stepped = [fsm.step(t) for t in toks]
        assert stepped == path[1:]
    finals = fsm.final_states(sim, offsets)
    assert finals[3] == fsm.initial
    assert finals.tolist() == [fsm.run(t)[-1] for t in inputs]


def test_hand_made_runs():
    fsm = example_a("stay")
    assert fsm.run(["a", "b", "c"]) == [0, 1, 2, 2]
    assert fsm.run(["b", "a"]) == [0, 2, 2]  # (2, a) unseen: stay
    assert fsm.run([]) == [0]
    fsm.step("a")
    fsm.reset()
    assert fsm.step("b") == 2


@pytest.mark.parametrize("fallback", FALLBACKS)
def test_tokens_nobody_has_seen_keep_the_state(fallback):
    fsm = make_fsm(TRIPLES_B, 4, ["x", "y", "z"], coords=COORDS_B, fallback=fallback)
    assert fsm.run(["x", "z", "unheard-of"]) == [0, 1, 1, 1]
    sim = fsm.simulate(np.array([0, -1, 2, -1]), np.array([0, 4]))
    assert sim.tolist() == [1, 1, 1, 1]


def test_out_of_vocabulary_tokens_read_as_unk():
    fsm = make_fsm([(0, "<unk>", 1, 3), (0, "good", 2, 1)], 3, ["<pad>", "<unk>", "good"])
    assert fsm.run(["zorblaxian"]) == fsm.run(["<unk>"]) == [0, 1]


# ----------------------------------------------------------------------------- exchange format
def test_to_dict_follows_the_design_schema():
    fsm = example_a("nearest")
    d = json.loads(json.dumps(fsm.to_dict()))  # plain JSON types only
    assert d["format"] == "stateseer.fsm" and d["version"] == 1
    assert d["classes"] == ["neg", "pos"] and d["initial"] == 0
    assert [s["id"] for s in d["states"]] == [0, 1, 2]
    assert [s["visits"] for s in d["states"]] == [5, 3, 4]
    assert [s["label"] for s in d["states"]] == ["neg", "neg", "pos"]
    for s in d["states"]:
        assert {"id", "visits", "label", "prediction"} <= set(s)
        assert len(s["prediction"]) == 2 and sum(s["prediction"]) == pytest.approx(1.0)
    assert d["states"][2]["prediction"] == [0.25, 0.75]
    trs = d["transitions"]
    assert all(set(t) == {"source", "target", "token", "count"} for t in trs)
    keys = [(t["source"], t["token"], t["target"]) for t in trs]
    assert len(keys) == len(set(keys))  # one entry per (source, token, target)
    assert sorted((t["source"], t["token"], t["target"], t["count"]) for t in trs) == sorted(
        TRIPLES_A)


@pytest.mark.parametrize("fallback", FALLBACKS)
def test_dict_and_file_round_trips_keep_delta_and_labels(tmp_path, fallback):
    fsm = example_a(fallback)
    back = FSM.from_dict(fsm.to_dict())
    path = tmp_path / "sub" / "fsm.json"
    fsm.save(path)
    loaded = FSM.load(path)
    for other in (back, loaded):
        assert other.fallback == fallback
        np.testing.assert_array_equal(other.delta, fsm.delta)
        np.testing.assert_array_equal(other.labels, fsm.labels)
        np.testing.assert_array_equal(other.visits, fsm.visits)
        assert triples(other) == triples(fsm)
        assert other.info == fsm.info
    buf = io.StringIO()
    fsm.save(buf)
    buf.seek(0)
    np.testing.assert_array_equal(FSM.load(buf).delta, fsm.delta)


@pytest.mark.parametrize("per_line", [1, 2, 100])
def test_a_big_fsm_is_written_in_pieces_and_reads_back_whole(tmp_path, monkeypatch,
                                                             per_line):
    """Above STREAM_TRANSITIONS the document is streamed (a line of transitions at a
    time) and reads back as the whole document does; exchanged() is that reading."""
    import stateseer.abstraction.automata.fsm as fsm_mod

    fsm = example_a()
    fsm.classes = ['the "transitions": [] class', "b"]  # the splice is not fooled
    whole = FSM.from_dict(fsm.to_dict())
    monkeypatch.setattr(fsm_mod, "STREAM_TRANSITIONS", per_line)
    path = tmp_path / "fsm.json"
    fsm.save(path)
    text = path.read_text()
    assert text.count("\n") > 1 and json.loads(text)["classes"] == fsm.classes
    for other in (FSM.load(path), fsm.exchanged()):
        for name in ("source", "token", "target", "count", "visits", "prediction",
                     "coords"):  # same transition order, same rounding
            np.testing.assert_array_equal(getattr(other, name), getattr(whole, name))
        assert (other.info, other.classes, other.alphabet) == (whole.info, whole.classes,
                                                               whole.alphabet)
        np.testing.assert_array_equal(other.delta, fsm.delta)
    buf = io.StringIO()
    fsm.save(buf)
    assert buf.getvalue() == text


def test_from_dict_without_alphabet_or_coords():
    d = example_a().to_dict()
    del d["alphabet"], d["fallback"]
    for s in d["states"]:
        s.pop("coords")
    fsm = FSM.from_dict(d)
    assert fsm.alphabet == ["a", "b", "c"] and fsm.fallback == "stay"
    assert fsm.run(["a", "b"]) == [0, 1, 2]


def test_save_refuses_to_overwrite(tmp_path):
    fsm = example_a()
    path = tmp_path / "fsm.json"
    fsm.save(path)
    before = path.read_text()
    with pytest.raises(AbstractionError, match="exists") as e:
        example_a("token").save(path)
    one_line(e.value)
    assert path.read_text() == before
    example_a("token").save(path, overwrite=True)
    assert FSM.load(path).fallback == "token"
    assert [p.name for p in tmp_path.iterdir()] == ["fsm.json"]  # no temporary left


def _doc() -> dict:
    return example_a().to_dict()


def _set(d, path, value):
    d = json.loads(json.dumps(d))
    obj = d
    for k in path[:-1]:
        obj = obj[k]
    if value is KeyError:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value
    return d


@pytest.mark.parametrize(("doc", "match"), [
    (_set(_doc(), ["format"], "aalpy.dfa"), "not a stateseer.fsm v1"),
    (_set(_doc(), ["version"], 2), "not a stateseer.fsm v1"),
    (_set(_doc(), ["states"], KeyError), "malformed"),
    (_set(_doc(), ["transitions"], KeyError), "malformed"),
    (_set(_doc(), ["states", 1, "id"], 7), "state ids"),
    (_set(_doc(), ["transitions", 0, "token"], "never-heard"), "malformed"),
    (_set(_doc(), ["states", 0, "prediction"], KeyError), "malformed"),
    (_set(_doc(), ["transitions", 0, "source"], "zero"), "malformed"),
])
def test_malformed_documents_raise(doc, match):
    with pytest.raises(AbstractionError, match=match) as e:
        FSM.from_dict(doc)
    one_line(e.value)


def test_transition_to_a_missing_state_is_refused():
    with pytest.raises(AbstractionError):
        fsm = FSM.from_dict(_set(_doc(), ["transitions", 0, "target"], 9))
        fsm.run(["a"])  # would land in state 9 of 3


def test_non_object_json_is_refused(tmp_path):
    path = tmp_path / "fsm.json"
    path.write_text("[1, 2, 3]")
    with pytest.raises(AbstractionError):
        FSM.load(path)


def test_load_errors(tmp_path):
    with pytest.raises(AbstractionError, match="stateseer abstract") as e:
        FSM.load(tmp_path / "missing.json")
    one_line(e.value)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(AbstractionError, match="not valid UTF-8 JSON") as e:
        FSM.load(bad)
    msg = one_line(e.value)  # one cause, and the step that writes the file as the fix
    assert msg.count("JSON") == 1 and msg.endswith(f"rerun `stateseer abstract "
                                                   f"{tmp_path.resolve().parent}`")


# ----------------------------------------------------------------------------- graph views
def test_to_networkx_has_scalar_attributes_and_writes_graphml():
    fsm = example_a("nearest")
    g = fsm.to_networkx()
    assert isinstance(g, nx.MultiDiGraph)
    assert g.number_of_nodes() == 3 and g.number_of_edges() == 6
    scalar = (bool, int, float, str)
    for _, attrs in g.nodes(data=True):
        assert all(isinstance(v, scalar) for v in attrs.values()), attrs
    for _, _, attrs in g.edges(data=True):
        assert all(isinstance(v, scalar) for v in attrs.values()), attrs
    assert all(isinstance(v, scalar) for v in g.graph.values())
    assert g.nodes[0]["initial"] is True and g.nodes[2]["label"] == "pos"
    assert g.nodes[2]["p_pos"] == pytest.approx(0.75)
    (ab,) = [d for u, v, d in g.edges(data=True) if (u, v, d["token"]) == (0, 1, "a")]
    assert ab["count"] == 2
    buf = io.BytesIO()
    nx.write_graphml(g, buf)
    buf.seek(0)
    back = nx.read_graphml(buf)
    assert back.number_of_nodes() == 3 and back.number_of_edges() == 6
    assert sum(c for _, _, c in back.edges(data="count")) == int(fsm.count.sum()) == 7


def test_state_edges_aggregate_tokens_per_state_pair():
    edges = example_a().state_edges()
    got = [(e["source"], e["target"], e["count"], e["probability"], e["top_tokens"],
            e["n_tokens"]) for e in edges]
    assert got == [
        (0, 1, 2, 0.5, [("a", 2)], 1),
        (0, 2, 2, 0.5, [("a", 1), ("b", 1)], 2),
        (1, 1, 1, 0.5, [("a", 1)], 1),
        (1, 2, 1, 0.5, [("b", 1)], 1),
        (2, 2, 1, 1.0, [("c", 1)], 1),
    ]
    short = example_a().state_edges(top_tokens=1)
    assert short[1]["top_tokens"] == [("a", 1)] and short[1]["n_tokens"] == 2


def test_pruned_edges_respect_top_k_self_loops_and_min_count():
    fsm = example_a()

    def pairs(edges):
        return [(e["source"], e["target"]) for e in edges]

    assert pairs(fsm.pruned_edges(top_k=10)) == [(0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
    # one per state; count ties go to the lower target
    assert pairs(fsm.pruned_edges(top_k=1)) == [(0, 1), (1, 1), (2, 2)]
    assert pairs(fsm.pruned_edges(top_k=1, self_loops=False)) == [(0, 1), (1, 2)]
    assert pairs(fsm.pruned_edges(top_k=10, min_count=2)) == [(0, 1), (0, 2)]


def test_empty_fsm_views():
    fsm = make_fsm([], 2, ["x"])
    assert fsm.state_edges() == [] and fsm.pruned_edges() == []
    assert fsm.delta.tolist() == [[0], [1]]
    assert fsm.to_dict()["transitions"] == []


def test_fsm_extracted_dfa_and_grammar_dfa_share_one_automaton_base_and_dot_writer():
    from stateseer.abstraction.automata.dfa import ExtractedDFA
    from stateseer.core.automaton import Automaton
    from stateseer.rnn_models.formal import GRAMMARS

    fsm = example_a()
    parity = ExtractedDFA(alphabet=("a", "b"), classes=["reject", "accept"],
                          transitions=np.array([[1, 0], [0, 1]]), state_class=np.array([1, 0]))
    grammar = GRAMMARS["tomita1"].dfa
    for automaton in (fsm, parity, grammar):
        assert isinstance(automaton, Automaton)
        assert type(automaton).reset is Automaton.reset
        assert type(automaton).step is Automaton.step
        dot = automaton.to_dot()
        assert '__start0 [label="", shape=none, width=0, height=0];' in dot
        assert f"__start0 -> s{automaton.initial};" in dot
    tokens = [*fsm.alphabet, "never-seen", *fsm.alphabet[::-1]]
    batch = fsm.simulate(fsm.encode(tokens), np.array([0, len(tokens)]))  # vectorised path
    assert fsm.run(tokens) == [fsm.initial, *batch.tolist()]
    assert parity.run("ab") == [0, 1, 1] and parity.state == 1
    parity.reset()
    assert parity.state == 0 and parity.output() == "accept"


# ----------------------------------------------------------------------------- probabilistic
def _pfa_by_hand(fsm: FSM, tokens: list[int], smoothing: float = 0.0) -> np.ndarray:
    """The state distribution after ``tokens``, one dense matrix product per token."""
    S, V = fsm.n_states, len(fsm.alphabet)
    T = np.zeros((V, S, S))
    for s, t, d, c in zip(fsm.source, fsm.token, fsm.target, fsm.count, strict=True):
        T[t, s, d] += c
    n = T.sum(2, keepdims=True)
    T = np.where(n > 0, T / np.maximum(n, 1), 0.0)
    for t in range(V):
        for s in range(S):
            if n[t, s, 0] == 0:  # unseen pair: the deterministic fallback's target
                T[t, s, fsm.delta[s, t]] = 1.0
    M = np.zeros((S, S))
    np.add.at(M, (fsm.source, fsm.target), fsm.count)
    M[M.sum(1) == 0, np.flatnonzero(M.sum(1) == 0)] = 1
    M /= M.sum(1, keepdims=True)
    p = np.eye(S)[fsm.initial]
    for t in tokens:
        step = np.eye(S) if t < 0 else T[t]
        p = (1 - smoothing) * (p @ step) + smoothing * (p @ M)
    return p


@pytest.fixture(params=["compiled", "sparse"])
def pfa_path(request, monkeypatch):
    """Both implementations of the probabilistic run: numba's loop and scipy's products."""
    if request.param == "sparse":
        monkeypatch.setattr("stateseer.abstraction.automata.fsm.HAVE_NUMBA", False)
    return request.param


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("fallback", ["stay", "displacement"])
def test_probabilistic_simulation_equals_the_dense_pfa(fallback, smoothing, pfa_path):
    fsm = example_a(fallback)
    inputs = [[0, 1], [0, 0, 2], [], [2, 0, -1, 1], [1], [0, 0, 0, 0, 0]]
    offsets = np.r_[0, np.cumsum([len(x) for x in inputs])]
    tokens = np.array([t for x in inputs for t in x], np.int64)
    final, path = fsm.simulate_distribution(tokens, offsets, smoothing=smoothing)
    for i, x in enumerate(inputs):
        want = _pfa_by_hand(fsm, x, smoothing)
        np.testing.assert_allclose(final[i], want, atol=1e-12)
        if x:
            assert path[offsets[i + 1] - 1] == want.argmax()
    np.testing.assert_allclose(final.sum(1), 1.0)
    # from the initial state, 'a' leads to state 1 twice and to state 2 once
    one_a, _ = fsm.simulate_distribution(np.array([0]), np.array([0, 1]))
    np.testing.assert_allclose(one_a[0], [0, 2 / 3, 1 / 3])


def test_probabilistic_prediction_weighs_state_predictions():
    fsm = example_a()
    final, _ = fsm.simulate_distribution(np.array([0]), np.array([0, 1]))
    # 2/3 x mean P(pos) of state 1 (0.3833) + 1/3 x 0.75 = 0.5056 -> pos, whereas the
    # argmax path ends in state 1 (neg)
    assert fsm.predict_distribution(final).tolist() == [1]
    path, pred = fsm.simulate_predictions(np.array([0]), np.array([0, 1]), "argmax")
    assert path.tolist() == [1] and pred.tolist() == [0]
    fsm.simulation = "probabilistic"
    path2, pred2 = fsm.simulate_predictions(np.array([0]), np.array([0, 1]))
    assert path2.tolist() == [1] and pred2.tolist() == [1]  # the path stays deterministic


def test_a_deterministic_machine_simulates_the_same_both_ways():
    fsm = make_fsm([(0, "x", 1, 3), (1, "x", 2, 1), (2, "y", 1, 2)], 3, ["x", "y"])
    tokens, offsets = np.array([0, 0, 1, 1, 0]), np.array([0, 3, 5])
    final, path = fsm.simulate_distribution(tokens, offsets)
    np.testing.assert_array_equal(path, fsm.simulate(tokens, offsets))
    assert set(np.unique(final)) <= {0.0, 1.0}


def test_simulation_mode_round_trips_and_is_checked():
    fsm = example_a()
    fsm.simulation, fsm.smoothing = "probabilistic", 0.1
    back = FSM.from_dict(json.loads(json.dumps(fsm.to_dict())))
    assert (back.simulation, back.smoothing) == ("probabilistic", 0.1)
    with pytest.raises(AbstractionError, match="simulation") as e:
        FSM.from_dict({**fsm.to_dict(), "simulation": "best"})
    one_line(e.value)
    with pytest.raises(AbstractionError, match="smoothing"):
        fsm.simulate_distribution(np.array([0]), np.array([0, 1]), smoothing=1.0)


def test_state_edges_are_computed_once_and_handed_out_as_copies():
    fsm = example_a("nearest")
    first = fsm.state_edges()
    assert first == fsm._state_edges(5)
    first[0]["top_tokens"].append("changed by a caller")
    first[0]["count"] = -1
    assert fsm.state_edges() == fsm._state_edges(5)  # the cached edges are untouched
    assert fsm.state_edges(top_tokens=1) == fsm._state_edges(1)


def test_probabilistic_simulation_in_blocks_on_threads_equals_one_block(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # make test runs with 1
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    fsm = example_a("displacement")
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 12, 9000)  # over the 8,192 inputs that split into blocks
    offsets = np.r_[0, np.cumsum(lengths)]
    tokens = rng.integers(-1, 3, int(offsets[-1]))
    final, path = fsm.simulate_distribution(tokens, offsets)
    one_final, one_path = fsm._simulate_block(tokens, offsets, 0.0)
    if fsm_module.HAVE_NUMBA:  # the compiled loop on threads = the same loop on one
        solo, solo_path = fsm._simulate_compiled(tokens, offsets, 0.0, True, 1)
        assert np.array_equal(final, solo) and np.array_equal(path, solo_path)
        # and agrees with the sparse products to rounding (sums taken in another order)
        np.testing.assert_allclose(final, one_final, rtol=0, atol=1e-12)
        assert np.array_equal(path, one_path)
    else:
        assert np.array_equal(final, one_final) and np.array_equal(path, one_path)
    no_path, none = fsm.simulate_distribution(tokens, offsets, path=False)
    assert none is None and np.array_equal(no_path, final)


def _random_machine(fallback: str, seed: int = 0) -> tuple[FSM, np.ndarray, np.ndarray]:
    """A machine of 12 states over 30 tokens from random paths (many unseen pairs), and
    fresh inputs to run through it (tokens outside the alphabet included)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 9, 300)
    offsets = np.r_[0, np.cumsum(lengths)]
    n = int(offsets[-1])
    proba = rng.dirichlet([1, 1], n)
    fsm = FSM.from_paths(rng.integers(0, 11, n), offsets, rng.integers(0, 30, n), proba,
                         np.array([0.5, 0.5]), n_states=11, classes=["a", "b"],
                         alphabet=[f"t{i}" for i in range(30)],
                         coords=rng.normal(size=(12, 3)), fallback=fallback)
    lengths = rng.integers(0, 15, 500)
    off = np.r_[0, np.cumsum(lengths)]
    return fsm, rng.integers(-1, 30, int(off[-1])), off


@pytest.mark.parametrize("fallback", ["displacement", "nearest", "stay"])
def test_compiled_loops_give_the_tables_and_paths_of_the_numpy_ones(fallback, monkeypatch):
    if not fsm_module.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    fsm, tokens, offsets = _random_machine(fallback)
    delta, path = fsm.delta.copy(), fsm.simulate(tokens, offsets)
    monkeypatch.setattr("stateseer.abstraction.automata.fsm.HAVE_NUMBA", False)
    plain, _, _ = _random_machine(fallback)
    assert np.array_equal(plain.delta, delta)
    assert np.array_equal(plain.simulate(tokens, offsets), path)
    # and a path is the table read one input, one token at a time
    for i in range(0, len(offsets) - 1, 50):
        s = fsm.initial
        for p in range(offsets[i], offsets[i + 1]):
            s = s if tokens[p] < 0 else fsm.delta[s, tokens[p]]
            assert path[p] == s


def test_a_token_id_past_the_alphabet_is_refused_not_run():
    fsm, tokens, offsets = _random_machine("stay")
    tokens = tokens.copy()
    tokens[3] = 31  # the alphabet has 30 tokens; 30 is the stay column, 31 is nothing
    with pytest.raises(IndexError):
        fsm.simulate(tokens, offsets)
