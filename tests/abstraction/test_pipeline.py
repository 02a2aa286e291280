"""End to end: record a real run, abstract it, reload, export, and re-derive the figures."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from stateseer.abstraction.analysis import metrics
from stateseer.abstraction.analysis.metrics import choose_knee
from stateseer.abstraction.automata.export import read_dot, write_traces_csv
from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.errors import AbstractionError
from stateseer.abstraction.pipeline import Abstraction, abstract_run
from stateseer.app.workflows.exports import export_run
from stateseer.core.traces import Traces
from stateseer.rnn_models.engine import record_run
from stateseer.rnn_models.run import ModelRun
from tests.conftest import REQUIRE_BROWSER, one_line

TEXT_STATES = 12


def _fresh_copy(src: Path, dst: Path) -> Path:
    """Copy a session run without its traces or abstraction (other tests record into it)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("traces*", "abstraction*"))
    return dst


@pytest.fixture(scope="module")
def text_abs(tmp_path_factory, text_run) -> tuple[Path, Abstraction]:
    """The small GRU run, recorded and abstracted with the defaults (split by prediction)."""
    run = _fresh_copy(text_run, tmp_path_factory.mktemp("pipeline") / "small")
    record_run(run)
    return run, abstract_run(run, n_states=TEXT_STATES)


@pytest.fixture(scope="module")
def tomita_abs(tmp_path_factory, tomita_run) -> tuple[Path, Abstraction]:
    """Tomita 3, train and val recorded only, on a coarse 4-cell grid: imperfect fidelity."""
    run = _fresh_copy(tomita_run, tmp_path_factory.mktemp("pipeline") / "t3")
    record_run(run, splits=["train", "val"])
    ab = abstract_run(run, n_states=4, method="grid", features="pca",
                      split_by_prediction=False)
    return run, ab


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _refigure(fsm: FSM, rows: list[dict[str, str]], column: str) -> float:
    """Share of rows whose final state (in ``column``) has the label of the prediction."""
    hits = [fsm.classes[int(fsm.labels[json.loads(r[column])[-1]])] == r["prediction"]
            for r in rows]
    return sum(hits) / len(hits)


# ----------------------------------------------------------------------------- what is written
def test_abstract_run_writes_the_abstraction_and_its_figures(text_abs):
    run, ab = text_abs
    files = {p.name for p in (run / "abstraction").iterdir()}
    expected = {"meta.json", "abstractor.npz", "fsm.json", "patterns.json"}
    for split in ("train", "val", "test"):
        expected |= {f"{split}.states.npy", f"{split}.simulated.npy"}
    assert expected <= files
    metrics = ModelRun(run).metrics()
    fig = metrics["abstraction"]
    assert "test_accuracy" in metrics and "train_accuracy" in metrics  # merged, not replaced
    assert fig["n_states"] == TEXT_STATES and fig["n_fsm_states"] == TEXT_STATES + 1
    assert fig["evaluated_on"] == "test"
    assert 0 < fig["simulation_chance"] <= 1 and "simulation_kappa" in fig
    for key in ("label_fidelity", "simulation_fidelity", "val_label_fidelity",
                "train_simulation_fidelity", "state_purity", "transition_coverage"):
        assert 0.0 <= fig[key] <= 1.0, key
    assert fig == json.loads(json.dumps(ab.metrics))
    traces = Traces(run / "traces")
    for split in ("train", "val", "test"):
        n = traces[split].n_steps
        assert ab.states[split].shape == ab.simulated[split].shape == (n,)
        assert ab.states[split].min() >= 1 and ab.states[split].max() <= TEXT_STATES
    assert ab.fsm.info["model_sha256"] == ModelRun(run).model_sha256()
    assert ab.fsm.info["n_states"] == TEXT_STATES and ab.fsm.info["layer"] == -1
    # every state holds one predicted class (split_by_prediction is the default)
    train = traces["train"]
    step_pred = np.asarray(train.proba).argmax(1)
    for s in np.unique(ab.states["train"]):
        assert len(np.unique(step_pred[ab.states["train"] == s])) == 1
    pats = json.loads((run / "abstraction" / "patterns.json").read_text(encoding="utf-8"))
    assert {"ngrams", "contexts", "influential", "buggy"} <= set(pats)
    assert len(pats["ngrams"]) == ab.fsm.n_states
    assert set(pats["buggy"]) == {"train", "val", "test"}


def test_abstraction_load_round_trip(text_abs):
    run, ab = text_abs
    back = Abstraction.load(run / "abstraction")
    assert back.n_states == ab.n_states == TEXT_STATES
    for split in ab.states:
        np.testing.assert_array_equal(back.states[split], ab.states[split])
        np.testing.assert_array_equal(back.simulated[split], ab.simulated[split])
    assert back.fsm.to_dict() == ab.fsm.to_dict()
    np.testing.assert_array_equal(back.fsm.delta, ab.fsm.delta)
    test = Traces(run / "traces")["test"]
    np.testing.assert_array_equal(back.assign(test.hidden, test.proba), ab.states["test"])
    assert back.metrics == json.loads(json.dumps(ab.metrics))
    assert back.info["method"] == "kmeans" and back.info["random_state"] == 0
    assert back.assign(np.zeros((0, 32), np.float32), np.zeros((0, 2))).shape == (0,)


def test_load_without_an_abstraction(tmp_path):
    with pytest.raises(AbstractionError, match="stateseer abstract") as e:
        Abstraction.load(tmp_path / "abstraction")
    one_line(e.value)


def test_same_seed_twice_gives_identical_states(text_abs):
    run, ab = text_abs
    again = abstract_run(run, n_states=TEXT_STATES, save=False)
    for split in ab.states:
        np.testing.assert_array_equal(again.states[split], ab.states[split])
        np.testing.assert_array_equal(again.simulated[split], ab.simulated[split])
    assert again.fsm.to_dict()["transitions"] == ab.fsm.to_dict()["transitions"]


# ----------------------------------------------------------------------------- exports agree
@pytest.mark.parametrize("which", ["text", "tomita"])
def test_figures_recomputed_from_exports_equal_metrics(request, tmp_path, which):
    run, _ = request.getfixturevalue(f"{which}_abs")
    csv_path = export_run(run, "traces-csv", tmp_path / "traces.csv")
    json_path = export_run(run, "json", tmp_path / "fsm.json")
    fsm = FSM.load(json_path)
    rows = _read_csv(csv_path)
    fig = ModelRun(run).metrics()["abstraction"]
    traces = Traces(run / "traces")
    assert {r["split"] for r in rows} == set(traces.split_names)
    split = fig["evaluated_on"]
    ev = [r for r in rows if r["split"] == split]
    assert len(ev) == traces[split].n_inputs
    assert [int(r["id"]) for r in ev] == traces[split].rows.tolist()
    for r in ev:
        tokens, states = json.loads(r["tokens"]), json.loads(r["states"])
        sim = json.loads(r["simulated_states"])
        assert len(states) == len(sim) == len(tokens) + 1
        assert states[0] == sim[0] == fsm.initial
        assert r["label"] in fsm.classes and r["prediction"] in fsm.classes
    assert _refigure(fsm, ev, "states") == fig["label_fidelity"]
    assert fsm.simulation == fig["simulation"] == "probabilistic"  # the default
    assert _resimulated(ev) == fig["simulation_fidelity"] == fig[
        "simulation_fidelity_probabilistic"]
    assert _refigure(fsm, ev, "simulated_states") == fig["simulation_fidelity_argmax"]
    lo, hi = fig["simulation_fidelity_ci"]
    assert lo <= fig["simulation_fidelity"] <= hi
    for other in set(traces.split_names) - {split}:
        part = [r for r in rows if r["split"] == other]
        assert _refigure(fsm, part, "states") == fig[f"{other}_label_fidelity"]
        assert _resimulated(part) == fig[f"{other}_simulation_fidelity"]


def _resimulated(rows: list[dict[str, str]]) -> float:
    """Share of rows whose ``simulated_prediction`` equals the RNN's prediction."""
    return sum(r["simulated_prediction"] == r["prediction"] for r in rows) / len(rows)


def test_tomita_figures_are_not_trivial_and_fall_back_to_val(tomita_abs):
    _, ab = tomita_abs
    fig = ab.metrics
    assert fig["evaluated_on"] == "val"  # no test split was recorded
    assert fig["n_states"] == 4 and ab.fsm.alphabet[-2:] == ["1", "0"]
    assert 0.5 < fig["simulation_fidelity"] < 1.0  # a 4-cell grid cannot be perfect
    assert fig["simulation_fidelity"] <= fig["label_fidelity"] + 0.1


def test_fsm_run_on_exported_tokens_reproduces_simulated_states(tmp_path, tomita_abs):
    run, _ = tomita_abs
    fsm = FSM.load(export_run(run, "json", tmp_path / "fsm.json"))
    rows = _read_csv(export_run(run, "traces-csv", tmp_path / "t.csv"))
    assert any(r["tokens"] == "[]" for r in rows)  # the empty string is an input
    for r in rows:
        assert fsm.run(json.loads(r["tokens"])) == json.loads(r["simulated_states"])


def test_fsm_run_reproduces_simulated_states_with_unknown_words(tmp_path, text_abs):
    run, _ = text_abs
    fsm = FSM.load(export_run(run, "json", tmp_path / "fsm.json"))
    rows = _read_csv(export_run(run, "traces-csv", tmp_path / "t.csv"))
    for r in rows:
        assert fsm.run(json.loads(r["tokens"])) == json.loads(r["simulated_states"])


def test_export_formats_of_a_run(tmp_path, tomita_abs):
    run, ab = tomita_abs
    doc = json.loads(export_run(run, "json", tmp_path / "a.json").read_text(encoding="utf-8"))
    assert doc == json.loads((run / "abstraction" / "fsm.json").read_text(encoding="utf-8"))
    dot = export_run(run, "dot", tmp_path / "a.dot").read_text(encoding="utf-8")
    back = read_dot(dot)
    assert back.n_transitions == ab.fsm.n_transitions
    np.testing.assert_array_equal(back.labels, ab.fsm.labels)
    g = nx.read_graphml(export_run(run, "graphml", tmp_path / "a.graphml"))
    assert g.number_of_nodes() == ab.fsm.n_states
    assert g.number_of_edges() == ab.fsm.n_transitions
    nl = json.loads(export_run(run, "node-link", tmp_path / "a.nl.json").read_text())
    assert len(nl["nodes"]) == ab.fsm.n_states
    with pytest.raises(AbstractionError, match="--force") as e:
        export_run(run, "json", tmp_path / "a.json")
    one_line(e.value)
    export_run(run, "json", tmp_path / "a.json", overwrite=True)
    with pytest.raises(AbstractionError, match="traces-csv") as e:
        export_run(run, "yaml", tmp_path / "a.yaml")
    one_line(e.value)
    with pytest.raises(AbstractionError, match="stateseer extract-dfa") as e:
        export_run(run, "json", tmp_path / "dfa.json", dfa=True)
    one_line(e.value)


def test_export_to_stdout(capsys, tomita_abs):
    run, ab = tomita_abs
    assert export_run(run, "json", "-") == Path("-")
    assert json.loads(capsys.readouterr().out)["states"][0]["visits"] == ab.fsm.visits[0]
    with pytest.raises(AbstractionError, match="binary") as e:
        export_run(run, "png", "-")
    one_line(e.value)


@pytest.mark.exe
def test_svg_export_of_a_run(tmp_path, tomita_abs):
    if shutil.which("dot") is None:
        if REQUIRE_BROWSER:
            pytest.fail("the Graphviz `dot` binary is required (STATESEER_REQUIRE_BROWSER=1)")
        pytest.skip("the Graphviz `dot` binary is not installed")
    run, ab = tomita_abs
    svg = export_run(run, "svg", tmp_path / "fsm.svg").read_text(encoding="utf-8")
    assert "<svg" in svg and svg.count('class="node"') == ab.fsm.n_states + 1


def test_export_needs_an_abstraction(tmp_path, copy_run, tomita_abs):
    run, _ = tomita_abs
    bare = copy_run(run)
    shutil.rmtree(bare / "abstraction")
    with pytest.raises(AbstractionError, match="stateseer abstract") as e:
        export_run(bare, "json", tmp_path / "x.json")
    one_line(e.value)


# ----------------------------------------------------------------------------- options, errors
def test_auto_state_count_writes_its_curve(monkeypatch, copy_run, tomita_abs):
    run = copy_run(tomita_abs[0])
    monkeypatch.setattr(metrics, "AUTO_CANDIDATES", (2, 3, 6, 50))
    ab = abstract_run(run, n_states="auto", method="grid", features="pca",
                      split_by_prediction=False, cap=5)
    auto = ModelRun(run).metrics()["abstraction"]["auto"]
    assert auto == json.loads(json.dumps(ab.metrics["auto"]))
    assert auto["cap"] == 5 and auto["candidates"] == [2, 3, 5]  # the cap is a candidate
    curve = auto["curve"]
    assert [c["n_states"] for c in curve] == [2, 3, 5]
    for c in curve:  # shaped as `stateseer sweep` writes its points
        assert c["split"] == "val" and 0 <= c["label_fidelity"] <= 1
        lo, hi = c["simulation_fidelity_ci"]
        assert 0 <= lo <= c["simulation_fidelity"] <= hi <= 1
    chosen, why = choose_knee(curve, cap=5)
    assert ab.metrics["n_states_requested"] == chosen <= 5
    assert why in auto["reason"] and "cap 5" in auto["reason"]
    assert ab.metrics["n_states"] == ab.n_states <= chosen  # a grid may fill fewer cells
    # and the abstraction actually kept is refitted with that count
    assert Abstraction.load(run / "abstraction").n_states == ab.n_states


def test_auto_never_exceeds_the_default_cap(monkeypatch, copy_run, tomita_abs):
    run = copy_run(tomita_abs[0])
    monkeypatch.setattr(metrics, "AUTO_CANDIDATES", (2, 60, 100))
    ab = abstract_run(run, n_states="auto", method="grid", features="pca",
                      split_by_prediction=False, save=False)
    assert [c["n_states"] for c in ab.metrics["auto"]["curve"]] == [2, 40]
    assert ab.metrics["n_states_requested"] <= 40


def test_auto_starts_at_the_classes_and_refuses_a_cap_below_them(copy_run, tomita_abs):
    """States keep to one predicted class: fewer states than classes cannot work, so they
    are neither tried nor accepted as a cap (refused before any fitting)."""
    run = copy_run(tomita_abs[0])
    with pytest.raises(AbstractionError, match="--auto-cap 1 is below the 2") as e:
        abstract_run(run, n_states="auto", cap=1, save=False)
    one_line(e.value)
    assert metrics.auto_candidates(40, min_states=6)[0] == 8


def test_auto_needs_a_validation_split(copy_run, text_abs):
    run = copy_run(text_abs[0])
    record_run(run, splits=["train", "test"])
    with pytest.raises(AbstractionError, match="validation split") as e:
        abstract_run(run, n_states="auto", save=False)
    one_line(e.value)


@pytest.mark.parametrize("bad", ["many", 2.5, True])
def test_bad_state_count(text_abs, bad):
    with pytest.raises(AbstractionError, match="positive integer or 'auto'") as e:
        abstract_run(text_abs[0], n_states=bad, save=False)
    one_line(e.value)


def test_stale_traces_are_refused(copy_run, text_abs):
    run = copy_run(text_abs[0])
    with (run / "model.pt").open("ab") as fh:  # the model changed after recording
        fh.write(b"\0")
    before = (run / "abstraction" / "fsm.json").read_bytes()
    with pytest.raises(AbstractionError, match="stateseer record") as e:
        abstract_run(run, n_states=TEXT_STATES)
    one_line(e.value)
    assert (run / "abstraction" / "fsm.json").read_bytes() == before  # nothing overwritten


def test_layer_mismatch_is_refused(text_abs):
    with pytest.raises(AbstractionError, match=r"layer -1, not 0.*--layer 0") as e:
        abstract_run(text_abs[0], layer=0, save=False)
    one_line(e.value)


def test_too_many_states_for_the_traces(tomita_abs):
    with pytest.raises(AbstractionError, match="states requested") as e:
        abstract_run(tomita_abs[0], n_states=10**6, save=False)
    one_line(e.value)


def test_trace_rows_match_the_design_columns(text_abs):
    run, ab = text_abs
    traces = Traces(run / "traces")
    rows = ab.trace_rows(traces, "val")
    assert len(rows) == traces["val"].n_inputs
    buf = io.StringIO()
    write_traces_csv(buf, rows)
    header = buf.getvalue().splitlines()[0]
    assert header == ("id,split,label,prediction,tokens,states,simulated_states,"
                      "simulated_prediction")  # a probabilistic FSM (DESIGN.md)
    r = rows[0]
    assert r["states"][1:] == ab.states["val"][traces["val"].steps(0)].tolist()
    assert r["tokens"] == traces["val"].tokens(0)


def test_gmm_method_with_default_split(tomita_abs):
    ab = abstract_run(tomita_abs[0], n_states=4, method="gmm", save=False)
    assert ab.metrics["label_fidelity"] >= 0.0


def test_the_fsm_arrays_load_as_the_json_does_and_a_stale_or_damaged_copy_is_ignored(
        text_abs, tmp_path):
    import os
    import shutil

    from stateseer.abstraction.automata.fsm import FSM
    from stateseer.abstraction.pipeline import FSM_ARRAYS, load_fsm_fast

    run, _ = text_abs
    src = tmp_path / "abstraction"
    shutil.copytree(run / "abstraction", src)
    assert (src / FSM_ARRAYS).exists()
    fast, slow = load_fsm_fast(src / FSM_ARRAYS, src / "fsm.json"), FSM.load(src / "fsm.json")
    for k in ("source", "token", "target", "count", "visits", "prediction"):
        assert np.array_equal(getattr(fast, k), getattr(slow, k)), k
    assert (fast.classes, fast.alphabet, fast.initial, fast.fallback, fast.simulation,
            fast.info) == (slow.classes, slow.alphabet, slow.initial, slow.fallback,
                           slow.simulation, slow.info)
    assert np.array_equal(Abstraction.load(src).fsm.prediction, slow.prediction)
    # the JSON edited by hand (another size or time): the arrays are not trusted
    doc = json.loads((src / "fsm.json").read_text())
    doc["states"][1]["visits"] += 7
    (src / "fsm.json").write_text(json.dumps(doc))
    assert load_fsm_fast(src / FSM_ARRAYS, src / "fsm.json").visits[1] == slow.visits[1] + 7
    st = (src / "fsm.json").stat()
    os.utime(src / "fsm.json", ns=(st.st_atime_ns, st.st_mtime_ns))
    (src / FSM_ARRAYS).write_bytes(b"garbage")
    assert load_fsm_fast(src / FSM_ARRAYS, src / "fsm.json").visits[1] == slow.visits[1] + 7
