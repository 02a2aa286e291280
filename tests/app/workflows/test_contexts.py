"""The nearest-context index (stateseer.app.workflows.contexts) on a real run."""

from __future__ import annotations

import json
import shutil

import numpy as np


def test_context_index_is_reused_then_rebuilt_for_new_traces(copy_run, analysed_run):
    from stateseer.app.workflows.contexts import context_index
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    run_dir = copy_run(analysed_run)
    run = ModelRun(run_dir)
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


def test_an_index_that_cannot_be_saved_is_still_used(copy_run, analysed_run, monkeypatch):
    from stateseer.abstraction.analysis.neighbors import ContextIndex
    from stateseer.app.workflows.contexts import context_index
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    run_dir = copy_run(analysed_run)
    shutil.rmtree(run_dir / "index")

    def refuse(self, path):
        raise OSError("read-only file system")

    monkeypatch.setattr(ContextIndex, "save", refuse)
    run = ModelRun(run_dir)
    ix = context_index(run, Traces(run.traces_dir))
    assert ix.n_indexed_ == Traces(run.traces_dir)["train"].n_steps
    assert not (run_dir / "index" / "train.contexts.npz").exists()
    # held in memory, not mapped from the work files removed after the build
    assert not any(isinstance(getattr(ix, f"{m}_"), np.memmap)
                   for m in ("codes", "norms", "pc2"))


def test_nearest_contexts_and_projection_of_a_training_step(analysed_run):
    import numpy as np

    from stateseer.abstraction.pipeline import Abstraction
    from stateseer.app.workflows.contexts import context_index, nearest_contexts, projection_bins
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    run = ModelRun(analysed_run)
    traces = Traces(run.traces_dir)
    train = traces["train"]
    states = Abstraction.load(run.abstraction_dir).states["train"]
    ix = context_index(run, traces)
    step = int(train.offsets[3])  # first step of input 3
    res = nearest_contexts(ix, train, states, traces.classes,
                           np.asarray(train.hidden[step]), k=4, window=2,
                           query_state=int(states[step]))
    top = res["rows"][0]
    assert top["distance"] < 1e-3 and top["state"] == int(states[step])
    assert res["summary"]["k"] == 4 and res["summary"]["same_state"] >= 1
    proj = projection_bins(ix, states, bins=8)  # (the sample it replaced: 50 points)
    assert proj["xy"].shape == (len(proj["count"]), 2) == (len(proj["states"]), 2)
    assert 0 < len(proj["count"]) <= 64


def test_a_damaged_index_is_rebuilt(copy_run, analysed_run):
    from stateseer.app.workflows.contexts import context_index
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    run_dir = copy_run(analysed_run)
    run = ModelRun(run_dir)
    n = Traces(run.traces_dir)["train"].n_steps
    (run_dir / "index" / "train.contexts.json").write_text("[1, 2, 3]")
    assert context_index(run, Traces(run.traces_dir)).n_indexed_ == n
    (run_dir / "index" / "train.contexts.npz").write_bytes(b"garbage")
    assert context_index(run, Traces(run.traces_dir)).n_indexed_ == n


def test_the_projection_draws_every_training_state_binned(analysed_run):
    import numpy as np

    from stateseer.abstraction.pipeline import Abstraction
    from stateseer.app.explorer.views.nearest import projection_figure
    from stateseer.app.workflows.contexts import context_index, projection_bins
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    run = ModelRun(analysed_run)
    traces = Traces(run.traces_dir)
    ab = Abstraction.load(run.abstraction_dir)
    states = ab.states["train"]
    ix = context_index(run, traces)
    b = projection_bins(ix, states, bins=40, chunk=1000)  # several chunks
    assert b["n_total"] == traces["train"].n_steps == int(b["count"].sum())  # no sampling
    # each bin's state is its most frequent one, recounted from every step's coordinates
    xy = ix.transform(np.asarray(traces["train"].hidden, np.float32))[:, :2]
    lo, hi = xy.min(0), xy.max(0)
    cell = np.clip(((xy - lo) / ((hi - lo) / 40)).astype(int), 0, 39)
    busiest = int(b["count"].argmax())
    near = np.all(np.abs(xy - b["xy"][busiest]) <= (hi - lo) / 80 + 1e-4, axis=1)
    assert near.sum() == b["count"][busiest]
    assert np.bincount(states[near]).argmax() == b["states"][busiest]
    assert len(np.unique(cell[:, 0] * 40 + cell[:, 1])) == len(b["count"])
    fig = projection_figure(b, ab.fsm.prediction, np.zeros((3, 2)), [0, 1, 2], ["a", "b"])
    first = fig["data"][0]
    assert first["type"] == "scattergl" and len(first["x"]) == len(b["count"])
    assert first["name"].startswith(f"all {b['n_total']:,} training states, binned 40×40")
