"""State forcing (stateseer.app.workflows.forcing) on a real recorded and abstracted run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stateseer.core.errors import StateseerError
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
    from stateseer.abstraction.pipeline import abstract_run

    run = copy_run(analysed_run)
    abstract_run(run, n_states=6)
    assert not (run / "abstraction" / "centroids.npy").exists()
    assert "forcing_agreement" not in json.loads((run / "metrics.json").read_text())[
        "abstraction"]


def test_a_damaged_centroids_file_is_recomputed(copy_run, analysed_run):
    from stateseer.abstraction.pipeline import Abstraction
    from stateseer.app.workflows.forcing import load_centroids
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    run_dir = copy_run(analysed_run)
    path = run_dir / "abstraction" / "centroids.npy"
    good = np.load(path)
    path.write_bytes(b"not numpy")
    run = ModelRun(run_dir)
    c = load_centroids(run, Abstraction.load(run.abstraction_dir), Traces(run.traces_dir))
    np.testing.assert_allclose(c, good, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.load(path), good, rtol=1e-5, atol=1e-6)  # saved again


def test_forcing_survival_matches_the_agreement_figure(analysed_run):
    from stateseer.abstraction.pipeline import Abstraction
    from stateseer.app.workflows.forcing import forcing_survival, load_centroids
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    run = ModelRun(analysed_run)
    traces = Traces(run.traces_dir)
    ab = Abstraction.load(run.abstraction_dir)
    ok = forcing_survival(run.load_model(), ab, load_centroids(run, ab, traces),
                          traces["test"], layer=traces.meta.get("layer", -1))
    m = json.loads((analysed_run / "metrics.json").read_text())["abstraction"]
    assert ok.dtype == bool and len(ok) == m["forcing"]["n_inputs"]
    assert float(ok.mean()) == pytest.approx(m["forcing_agreement"])


def test_forced_trace_refuses_empty_input_and_missing_step(analysed_run):
    from stateseer.abstraction.pipeline import Abstraction
    from stateseer.app.workflows.forcing import forced_trace, load_centroids
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    run = ModelRun(analysed_run)
    traces = Traces(run.traces_dir)
    ab = Abstraction.load(run.abstraction_dir)
    model, cent = run.load_model(), load_centroids(run, ab, traces)
    with pytest.raises(StateseerError) as e:
        forced_trace(model, ab, cent, np.zeros(0, np.int64))
    assert "empty input" in one_line(e.value)
    with pytest.raises(StateseerError) as e:
        forced_trace(model, ab, cent, np.array([2, 3]), step=5)
    assert "does not exist" in one_line(e.value)
    out = forced_trace(model, ab, cent, np.array([2, 3, 4]), step=1)
    assert out["forced"] == [False, True, False] and len(out["states"]) == 4
