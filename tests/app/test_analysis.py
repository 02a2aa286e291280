"""Forcing figures, the context index, nearest contexts and run comparison on real runs."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rnn_models.errors import StateseerError
from tests.conftest import one_line


def test_forcing_figures_are_written_and_consistent(analysed_run):
    m = json.loads((analysed_run / "metrics.json").read_text())["abstraction"]
    assert 0.0 <= m["forcing_agreement"] <= 1.0
    f = m["forcing"]
    assert f["split"] == "test" and f["every_step"] == m["forcing_agreement"]
    per = f["per_state"]
    assert per and all(0 <= v["agreement"] <= 1 and v["n_inputs"] > 0 for v in per.values())
    assert (analysed_run / "abstraction" / "centroids.npy").exists()
    # the label and simulation figures are still there (merged, not replaced)
    assert "label_fidelity" in m and "simulation_fidelity" in m


def test_centroids_file_is_dropped_when_the_abstraction_is_rewritten(copy_run, analysed_run):
    from abstraction.pipeline import abstract_run

    run = copy_run(analysed_run)
    abstract_run(run, n_states=6)
    assert not (run / "abstraction" / "centroids.npy").exists()
    assert "forcing_agreement" not in json.loads((run / "metrics.json").read_text())[
        "abstraction"]


def test_context_index_is_reused_then_rebuilt_for_new_traces(copy_run, analysed_run):
    from app.analysis import context_index
    from rnn_models.run import Run
    from rnn_models.traces import Traces

    run_dir = copy_run(analysed_run)
    run = Run(run_dir)
    npz = run_dir / "index" / "train.contexts.npz"
    before = npz.stat().st_mtime_ns
    context_index(run, Traces(run.traces_dir))
    assert npz.stat().st_mtime_ns == before  # read, not rebuilt
    meta = json.loads((run_dir / "index" / "train.contexts.json").read_text())
    meta["n_steps"] += 1  # as if the traces had been re-recorded
    (run_dir / "index" / "train.contexts.json").write_text(json.dumps(meta))
    assert context_index(run, Traces(run.traces_dir), build=False) is None
    context_index(run, Traces(run.traces_dir))
    assert npz.stat().st_mtime_ns != before


def test_nearest_contexts_of_a_training_step_start_with_itself(analysed_run):
    from app.data import RunData

    data = RunData(analysed_run)
    tr = data.trace_instance("train", 3)
    t = len(tr["tokens"]) - 1
    res = data.nearest(tr, t, k=5, window=2)
    top = res["rows"][0]
    assert top["distance"] == pytest.approx(0.0, abs=1e-4)
    assert top["token"] == tr["tokens"][t] and top["state"] == tr["states"][t + 1]
    assert len(top["left"]) <= 2 and len(top["right"]) <= 2
    s = res["summary"]
    assert s["k"] == 5 and sum(s["labels"].values()) == 5 and s["same_state"] >= 1
    # a typed input gets neighbours too, and an out-of-range step a clear error
    typed = data.trace_text("a wonderful , moving film")
    assert len(data.nearest(typed, 0, k=3)["rows"]) == 3
    with pytest.raises(StateseerError) as e:
        data.nearest(typed, 99)
    assert "does not exist" in one_line(e.value)
    xy = data.project_trace(typed)
    assert xy.shape == (len(typed["tokens"]) + 1, 2)


def test_forcing_a_trace_and_attributing_it(analysed_run):
    from app.data import RunData

    data = RunData(analysed_run)
    tr = data.trace_instance("test", 0)
    every = data.force(tr)
    assert len(every["proba"]) == len(tr["tokens"]) and all(every["forced"])
    one = data.force(tr, 1)
    assert one["forced"] == [t == 1 for t in range(len(tr["tokens"]))]
    np.testing.assert_allclose(one["proba"][0], tr["proba"][0], atol=1e-5)
    att = data.attribution(tr, "ig", "contrastive")
    assert att is data.attribution(tr, "ig", "contrastive")  # cached
    assert len(att.scores) == len(tr["tokens"])


def test_comparing_two_abstractions_of_the_same_run(copy_run, analysed_run, tmp_path):
    from abstraction.pipeline import abstract_run
    from app.data import RunData

    other = tmp_path / "other"
    shutil.copytree(analysed_run, other)
    abstract_run(other, n_states=8, random_state=3)
    data = RunData(analysed_run)
    data.other = RunData(other)
    cmp_ = data.comparison("test")
    s = cmp_["summary"]
    assert s["prediction_changed"] == 0 and s["fixed"] == s["broken"] == 0  # same model
    assert 0 < s["step_agreement"] <= 1
    tr = data.other_trace("test", 0)
    assert tr["run"] == "other" and len(tr["states"]) == len(tr["states_own"])
    # a run on other data is refused with one line
    data.other = RunData(copy_run(analysed_run))
    data.other.traces["test"].texts[0] = "something else"
    data._cache.clear()
    with pytest.raises(StateseerError) as e:
        data.comparison("test")
    assert "different test inputs" in one_line(e.value)


def test_cli_force_and_index(analysed_run, copy_run, capsys):
    from app.cli import main

    run = copy_run(analysed_run)
    assert main(["force", str(run)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 <= out["forcing_agreement"] <= 1 and out["n_inputs"] > 0
    assert main(["index", str(run)]) == 0
    assert (run / "index" / "train.contexts.npz").exists()


def test_abstract_keeps_its_result_when_forcing_is_impossible(analysed_run, copy_run,
                                                              monkeypatch, capsys):
    """A run of a user's own model cannot be forced by the CLI; the abstraction stays and
    the reason is one line on stderr."""
    import app.cli as cli

    def refuse(run, split="test"):
        raise StateseerError("state forcing needs a stateseer RNNClassifier")

    monkeypatch.setattr(cli, "_forcing", refuse)
    run = copy_run(analysed_run)
    assert cli.main(["abstract", str(run), "--states", "6", "--no-index"]) == 0
    captured = capsys.readouterr()
    assert "forcing skipped" in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])["n_states"] == 6


def test_cli_compare_writes_the_matching_and_changed_inputs(analysed_run, tmp_path, capsys):
    from abstraction.pipeline import abstract_run
    from app.cli import main

    other = tmp_path / "other"
    shutil.copytree(analysed_run, other)
    abstract_run(other, n_states=7, random_state=1)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(analysed_run), str(other), "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    doc = json.loads(out.read_text())
    assert doc["format"] == "stateseer.comparison" and doc["summary"] == summary
    assert len(doc["matching"]) == json.loads(
        (analysed_run / "abstraction" / "fsm.json").read_text())["states"].__len__()
    assert all(r["n_diff"] > 0 or r["prediction_a"] != r["prediction_b"]
               for r in doc["changed"])
    assert len(doc["changed"]) == summary["path_changed"]  # same model: paths only
    assert main(["compare", str(analysed_run), str(other), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err


def test_an_index_that_cannot_be_saved_is_still_used(copy_run, analysed_run, monkeypatch):
    from abstraction.neighbors import ContextIndex
    from app.analysis import context_index
    from rnn_models.run import Run
    from rnn_models.traces import Traces

    run_dir = copy_run(analysed_run)
    shutil.rmtree(run_dir / "index")

    def refuse(self, path):
        raise OSError("read-only file system")

    monkeypatch.setattr(ContextIndex, "save", refuse)
    run = Run(run_dir)
    ix = context_index(run, Traces(run.traces_dir))
    assert ix.n_indexed_ == Traces(run.traces_dir)["train"].n_steps
    assert not (run_dir / "index" / "train.contexts.npz").exists()


def test_nearest_rows_have_unique_ids_even_from_one_input():
    from app.views.nearest import nearest_list

    row = {"input": 4, "id": 40, "position": 1, "left": ["a"], "token": "b", "right": [],
           "cut_left": False, "cut_right": False, "state": 2, "label": "x",
           "prediction": "x", "correct": True, "distance": 0.1}
    res = {"rows": [row, {**row, "position": 3}],
           "summary": {"k": 2, "same_state": 2, "labels": {"x": 2}, "correct": 2,
                       "tokens": [("b", 2)], "states": [(2, 2)]}}
    div = nearest_list(res, {"token": "b", "step": 0, "state": 2}, ["x", "y"])
    ids = [c.id for c in _walk(div) if isinstance(getattr(c, "id", None), dict)]
    assert len(ids) == 2 and len({(i["index"], i["input"]) for i in ids}) == 2


def _walk(c):
    yield c
    kids = getattr(c, "children", None)
    for k in kids if isinstance(kids, list) else [kids] if kids is not None else []:
        if hasattr(k, "to_plotly_json"):
            yield from _walk(k)
