"""Exact DFA extraction: real RNNs on the Tomita grammars and a CSV language, imperfect RNNs
under a state budget, bad inputs, and the automaton's exchange formats.

Real runs (project defaults unless said otherwise) are trained once per module with one torch
thread (these small models train up to 10x faster that way on a busy 2-core machine) and
record only the train and test splits.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stateseer.abstraction.automata.dfa import ExtractedDFA, extract_dfa
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.traces import FORMAT, VERSION, Traces
from stateseer.rnn_models.formal import DFA, GRAMMARS, all_strings, minimal_size, minimize
from tests.conftest import one_line

MINIMAL = {"tomita1": 2, "tomita2": 3, "tomita3": 5, "tomita4": 4, "tomita5": 4, "tomita6": 3,
           "tomita7": 5}


# ---------------------------------------------------------------------------------------------
# Fixtures: real runs (trained lazily, once per module) and synthetic traces
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shared_trained):
    """``trained(name, dataset, **config) -> Traces``: train + record once, then reuse (a
    Tomita grammar with only its architecture set: the run the training tests check,
    trained once for both, copied here before recording)."""
    import torch

    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.train import TrainConfig, train_run

    root = tmp_path_factory.mktemp("dfa_runs")
    cache: dict[str, Traces] = {}

    def get(name: str, dataset: str, **config) -> Traces:
        if name not in cache:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                out = root / name
                if dataset.startswith("tomita") and set(config) <= {"arch"}:
                    shutil.copytree(shared_trained(dataset, **config), out)
                else:
                    train_run(TrainConfig(dataset=dataset, **config), out, progress=False)
                cache[name] = record_run(out, splits=("train", "test"))
            finally:
                torch.set_num_threads(threads)
        return cache[name]

    return get


def write_traces(path: Path, dfa: DFA, state_class: np.ndarray, classes: list[str],
                 splits: dict[str, list[str]], *, noise: float = 0.05, seed: int = 0,
                 nan_at: int | None = None) -> Traces:
    """Traces of a synthetic "RNN" whose hidden state is its DFA state plus noise.

    Parameters
    ----------
    path : Path
        The ``traces/`` directory to write.
    dfa : DFA
        Its states drive the hidden states (a well-separated cluster per state).
    state_class : ndarray of shape (dfa.n_states,)
        Predicted class of each state.
    splits : dict of str to list of str
        Strings of single-character symbols per split.
    nan_at : int, optional
        Put a NaN into this step of the train split.
    """
    rng = np.random.default_rng(seed)
    n_classes = len(classes)
    size = dfa.n_states + 3  # 3 distractor dimensions of pure noise
    centers = np.zeros((dfa.n_states, size))
    centers[:, : dfa.n_states] = 4.0 * np.eye(dfa.n_states)
    proba_of = np.full((dfa.n_states, n_classes), 0.1 / max(n_classes - 1, 1))
    proba_of[np.arange(dfa.n_states), state_class] = 0.9
    surface = list(dfa.alphabet)
    path.mkdir(parents=True)
    np.save(path / "initial_hidden.npy", centers[dfa.initial].astype(np.float32))
    np.save(path / "initial_proba.npy", proba_of[dfa.initial].astype(np.float32))
    (path / "surface.json").write_text(json.dumps(surface))
    meta_splits = {}
    for split, strings in splits.items():
        ids, lengths = dfa.encode(strings)
        states = dfa.run_batch(ids, lengths)
        mask = np.arange(ids.shape[1])[None, :] < lengths[:, None]
        step_state = states[:, 1:][mask]
        hidden = centers[step_state] + rng.normal(0, noise, (len(step_state), size))
        if nan_at is not None and split == "train":
            hidden[nan_at, 0] = np.nan
        final = proba_of[states[:, -1]]
        arrays = {
            "hidden": hidden.astype(np.float32), "proba": proba_of[step_state].astype(np.float32),
            "token_ids": (ids[mask] + 2).astype(np.int32),
            "surface_ids": ids[mask].astype(np.int32),
            "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            "labels": state_class[states[:, -1]].astype(np.int64),
            "final_proba": final.astype(np.float32), "rows": np.arange(len(strings)),
        }
        (path / split).mkdir()
        for k, v in arrays.items():
            np.save(path / split / f"{k}.npy", v)
        (path / split / "texts.json").write_text(json.dumps(strings))
        meta_splits[split] = {"n_inputs": len(strings), "n_steps": int(lengths.sum())}
    meta = {"format": FORMAT, "version": VERSION, "classes": classes, "dataset": "synthetic",
            "layer": -1, "state": "h", "dtype": "float32", "state_size": size,
            "n_classes": n_classes, "model_sha256": "synthetic", "splits": meta_splits}
    (path / "meta.json").write_text(json.dumps(meta))
    return Traces(path)


def _synthetic(tmp_path: Path, name: str = "tomita4", **kw) -> Traces:
    dfa = GRAMMARS[name].dfa
    strings = {"train": all_strings(dfa.alphabet, 8), "test": all_strings(dfa.alphabet, 9)}
    return write_traces(tmp_path / "traces", dfa, dfa.accepting.astype(np.int64),
                        ["reject", "accept"], strings, **kw)


# ---------------------------------------------------------------------------------------------
# Real RNNs: exact and minimal on every Tomita grammar
# ---------------------------------------------------------------------------------------------


def _check_exact(dfa: ExtractedDFA, name: str) -> None:
    grammar = GRAMMARS[name]
    strings = all_strings(grammar.dfa.alphabet, 12)
    want = grammar.dfa.accepts(strings)
    got = dfa.accepts(strings)
    wrong = [s for s, g, w in zip(strings, got, want, strict=True) if g != w]
    assert not wrong, f"{name}: {len(wrong)} strings <= 12 misclassified, e.g. {wrong[:5]}"
    assert dfa.n_states == MINIMAL[name] == minimal_size(dfa.dfa)
    r = dfa.report
    assert r["deterministic"] and not r["budget_exhausted"]
    assert r["minimal_size_match"] and r["grammar_agreement_le12"] == 1.0
    # The traces hold the RNN's own predictions: every test string <= 12 is in 'test'.
    assert r["n_eval_strings_le12"] == len(strings)
    assert 0.99 <= r["agreement_le12"] <= 1.0


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_lstm_tomita_exact_and_minimal(name, trained):
    traces = trained(f"{name}-lstm", name, arch="lstm")
    dfa = extract_dfa(traces, grammar=GRAMMARS[name])
    _check_exact(dfa, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tomita2", "tomita5"])
def test_gru_tomita_exact_and_minimal(name, trained):
    traces = trained(f"{name}-gru", name, arch="gru")
    dfa = extract_dfa(traces, grammar=GRAMMARS[name])
    _check_exact(dfa, name)


def test_csv_language_with_space_tokens(trained, tmp_path_factory):
    """Even number of a's over {a, b}, given as a CSV of space-separated symbols."""
    data = tmp_path_factory.mktemp("dfa_csv") / "even_a.csv"
    with data.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label"])
        for s in all_strings(("a", "b"), 10):  # '' included: a valid input with 'space'
            w.writerow([" ".join(s), "accept" if s.count("a") % 2 == 0 else "reject"])
    traces = trained("even_a", f"csv:{data}", tokenizer="space", arch="lstm", epochs=15)
    config = json.loads((traces.path.parent / "config.json").read_text())
    assert config["training"]["prefix_loss"]  # per-prefix labels looked up from the data
    dfa = extract_dfa(traces)
    assert dfa.classes == ["accept", "reject"] and dfa.accept_class == 0
    assert dfa.tokenizer == "space" and dfa.alphabet == ("a", "b")
    strings = all_strings(("a", "b"), 12)
    want = np.array([s.count("a") % 2 == 0 for s in strings])
    assert np.array_equal(dfa.accepts([" ".join(s) for s in strings]), want)
    assert np.array_equal(dfa.accepts([list(s) for s in strings]), want)
    assert dfa.n_states == 2 and dfa.report["agreement"] == 1.0
    assert "grammar" not in dfa.report  # not a built-in grammar


# ---------------------------------------------------------------------------------------------
# Imperfect RNN: bounded states, agreement reported (timings: benchmarks/dfa_extraction.py)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [3, 8, 30, 120])
def test_imperfect_rnn_under_budget(budget, trained):
    traces = trained("tomita6-ep1", "tomita6", arch="lstm", epochs=1)
    dfa = extract_dfa(traces, max_states=budget)
    r = dfa.report
    assert r["n_states_before_minimisation"] <= budget
    assert 1 <= dfa.n_states <= r["n_states_before_minimisation"]
    assert r["budget_exhausted"] == (not r["deterministic"])
    for key in ("agreement", "prefix_agreement", "agreement_le12", "train_prefix_agreement"):
        assert 0.0 <= r[key] <= 1.0
    # The automaton is complete and its agreement figure is what it says it is.
    assert (dfa.transitions >= 0).all() and (dfa.transitions < dfa.n_states).all()
    test = traces["test"]
    strings = [test.tokens(i) for i in range(test.n_inputs)]
    same = dfa.classify(strings) == test.predictions
    assert r["agreement"] == pytest.approx(same.mean())


def test_budget_reached_still_gives_complete_dfa(trained):
    traces = trained("tomita6-ep1", "tomita6", arch="lstm", epochs=1)
    small = extract_dfa(traces, max_states=2)
    assert small.report["budget_exhausted"] and small.report["n_states_before_minimisation"] == 2
    assert small.dfa.n_states == small.n_states
    large = extract_dfa(traces, max_states=150)
    assert large.report["train_prefix_agreement"] >= small.report["train_prefix_agreement"]


# ---------------------------------------------------------------------------------------------
# Synthetic traces: the algorithm without torch
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tomita3", "tomita5", "tomita7", "parens"])
def test_synthetic_rnn_gives_grammar(tmp_path, name):
    grammar = GRAMMARS[name]
    dfa = grammar.dfa
    strings = {"train": all_strings(dfa.alphabet, 8), "test": all_strings(dfa.alphabet, 9)}
    traces = write_traces(tmp_path / "traces", dfa, dfa.accepting.astype(np.int64),
                          ["reject", "accept"], strings)
    got = extract_dfa(traces)
    assert got.n_states == dfa.n_states
    canonical = minimize(dfa)  # both are BFS-numbered from the initial state
    assert np.array_equal(got.transitions, canonical.transitions)
    assert np.array_equal(got.accepting, canonical.accepting)
    test = all_strings(dfa.alphabet, 11)
    assert np.array_equal(got.accepts(test), dfa.accepts(test))
    assert got.report["agreement"] == got.report["prefix_agreement"] == 1.0


def test_three_classes_and_kmeans_start(tmp_path):
    """Class = number of a's mod 3; the RNN keeps 6 states (a parity bit it never needs)."""
    trans = np.array([[(q // 2 + 1) % 3 * 2 + (1 - q % 2), q - q % 2 + (1 - q % 2)]
                      for q in range(6)])
    dfa = DFA(("a", "b"), trans, np.zeros(6, dtype=bool))
    state_class = np.arange(6) // 2
    strings = {"train": all_strings(("a", "b"), 8), "test": all_strings(("a", "b"), 9)}
    traces = write_traces(tmp_path / "traces", dfa, state_class, ["zero", "one", "two"], strings)
    for initial_states in (None, 6, 12):
        got = extract_dfa(traces, initial_states=initial_states)
        assert got.n_states == 3, initial_states
        test = all_strings(("a", "b"), 11)
        want = np.array([s.count("a") % 3 for s in test])
        assert np.array_equal(got.classify(test), want)
        assert got.accept_class == 1 and got.accepting.sum() == 1
    assert "s0\\nzero" in got.to_dot()


def test_same_result_twice(tmp_path):
    traces = _synthetic(tmp_path, noise=0.3)
    a, b = extract_dfa(traces, initial_states=8), extract_dfa(traces, initial_states=8)
    assert np.array_equal(a.transitions, b.transitions)
    assert np.array_equal(a.state_class, b.state_class)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def test_nan_hidden_state_is_refused(tmp_path):
    traces = _synthetic(tmp_path, nan_at=7)
    with pytest.raises(AbstractionError) as err:
        extract_dfa(traces)
    msg = one_line(err.value)
    assert "NaN" in msg and "re-record" in msg


def test_empty_split_is_refused(tmp_path):
    dfa = GRAMMARS["tomita1"].dfa
    traces = write_traces(tmp_path / "traces", dfa, dfa.accepting.astype(np.int64),
                          ["reject", "accept"], {"train": [], "test": ["1"]})
    with pytest.raises(AbstractionError) as err:
        extract_dfa(traces)
    assert "empty" in one_line(err.value)
    with pytest.raises(AbstractionError) as err:
        extract_dfa(traces, split="val")
    assert "not recorded" in one_line(err.value)


def test_budget_below_classes_is_refused(tmp_path):
    traces = _synthetic(tmp_path)
    with pytest.raises(AbstractionError) as err:
        extract_dfa(traces, max_states=1)
    assert "max_states >= 2" in one_line(err.value)
    for bad in (0, -3, 2.5, "10"):
        with pytest.raises(AbstractionError) as err:
            extract_dfa(traces, max_states=bad)
        one_line(err.value)
    with pytest.raises(AbstractionError) as err:
        extract_dfa(traces, max_states=5, initial_states=9)
    one_line(err.value)


# ---------------------------------------------------------------------------------------------
# The automaton object and its formats
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def tomita4(tmp_path) -> ExtractedDFA:
    return extract_dfa(_synthetic(tmp_path))


def test_walking(tomita4):
    d = tomita4
    assert d.run("1000") == [0, 0, 1, 2, 3]
    assert d.output() == "reject"
    d.reset()
    assert d.state == 0 and d.output() == "accept"
    assert d.step("0") == 1
    with pytest.raises(AbstractionError) as err:
        d.step("2")
    assert "alphabet" in one_line(err.value)
    with pytest.raises(AbstractionError):
        d.classify(["0120"])
    assert d.classify([]).shape == (0,)
    assert d.accepts(["", ["0", "0"], "000"]).tolist() == [True, True, False]
    formal = d.dfa
    assert isinstance(formal, DFA) and formal.accepting.tolist() == d.accepting.tolist()


def test_dict_round_trip(tomita4, tmp_path):
    d = tomita4
    doc = json.loads(json.dumps(d.to_dict()))
    assert doc["format"] == "stateseer.fsm" and doc["version"] == 1 and doc["kind"] == "dfa"
    assert doc["initial"] == 0 and doc["classes"] == ["reject", "accept"]
    assert {"id", "visits", "label", "prediction", "accepting"} <= set(doc["states"][0])
    pairs = [(t["source"], t["token"]) for t in doc["transitions"]]
    assert len(pairs) == len(set(pairs)) == d.n_states * len(d.alphabet)  # one per pair
    assert sum(s["visits"] for s in doc["states"]) > 0
    assert doc["provenance"]["model_sha256"] == "synthetic"
    back = ExtractedDFA.from_dict(doc)
    strings = all_strings(d.alphabet, 10)
    assert np.array_equal(back.classify(strings), d.classify(strings))
    assert np.array_equal(back.transitions, d.transitions)
    assert back.report == doc["report"]

    broken = json.loads(json.dumps(doc))
    broken["transitions"] = broken["transitions"][1:]
    with pytest.raises(AbstractionError) as err:
        ExtractedDFA.from_dict(broken)
    assert "complete" in one_line(err.value)
    broken = json.loads(json.dumps(doc))
    broken["transitions"].append(dict(broken["transitions"][0]))
    with pytest.raises(AbstractionError) as err:
        ExtractedDFA.from_dict(broken)
    assert "exactly one" in one_line(err.value)
    with pytest.raises(AbstractionError):
        ExtractedDFA.from_dict({"format": "other"})


def test_save_load_and_overwrite(tomita4, tmp_path):
    path = tmp_path / "out" / "dfa.json"
    tomita4.save(path)
    with pytest.raises(AbstractionError) as err:
        tomita4.save(path)
    assert "overwrite=True" in one_line(err.value)
    tomita4.save(path, overwrite=True)
    back = ExtractedDFA.load(path)
    assert np.array_equal(back.transitions, tomita4.transitions)
    buf = io.StringIO()
    tomita4.save(buf)
    assert ExtractedDFA.load(io.StringIO(buf.getvalue())).n_states == tomita4.n_states
    with pytest.raises(AbstractionError):
        ExtractedDFA.load(tmp_path / "missing.json")


def test_dot_follows_aalpy(tomita4):
    dot = tomita4.to_dot()
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert '__start0 [label="", shape=none, width=0, height=0];' in dot
    assert "__start0 -> s0;" in dot
    assert dot.count("doublecircle") == 3  # tomita4: three accepting states, one dead
    assert 's3 -> s3 [label="0,1"];' in dot  # the dead state, parallel symbols merged


def test_networkx_view(tomita4):
    g = tomita4.to_networkx()
    assert g.number_of_nodes() == 4 and g.number_of_edges() == 8
    assert g.nodes[0]["initial"] and g.nodes[0]["accepting"]


def test_abstraction_dfa_does_not_import_torch():
    probe = ("import sys, stateseer.abstraction.automata.dfa\n"
             "print('torch' in sys.modules, 'dash' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False False"
