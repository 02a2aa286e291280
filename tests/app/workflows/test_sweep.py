"""The state-count sweep (stateseer.app.workflows.sweep): intervals, the knee, files."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateseer.app.workflows.sweep import bootstrap_ci, choose_knee, sweep_table, write_sweep
from stateseer.core.errors import StateseerError


def test_bootstrap_interval_covers_a_known_probability():
    """Bernoulli(0.8) agreement vectors: the 95 % interval holds 0.8 in >= 90 of 100."""
    rng = np.random.default_rng(12345)
    covered = 0
    for trial in range(100):
        agree = rng.random(400) < 0.8
        lo, hi = bootstrap_ci(agree, seed=trial)
        assert lo <= agree.mean() <= hi
        covered += lo <= 0.8 <= hi
    assert covered >= 90


def test_bootstrap_interval_narrows_with_more_inputs():
    rng = np.random.default_rng(0)
    small = bootstrap_ci(rng.random(100) < 0.7)
    large = bootstrap_ci(rng.random(10_000) < 0.7)
    assert large[1] - large[0] < (small[1] - small[0]) / 5
    assert bootstrap_ci(np.ones(50, bool)) == (1.0, 1.0)
    assert all(np.isnan(bootstrap_ci(np.zeros(0, bool))))


def _points(ks, ys):
    return [{"n_states": k, "simulation_fidelity": y} for k, y in zip(ks, ys, strict=True)]


def test_knee_of_a_saturating_curve():
    ks = [4, 8, 16, 32, 40, 60, 100]
    k, why = choose_knee(_points(ks, [0.60, 0.78, 0.84, 0.85, 0.852, 0.855, 0.86]))
    assert k == 16 and "knee" in why and "cap 40" in why  # 0.84, vs 0.852 at 40
    k, why = choose_knee(_points([4, 8, 16], [0.8, 0.801, 0.802]))
    assert k == 4 and "flat" in why


@settings(max_examples=200, deadline=None)
@given(ks=st.lists(st.integers(1, 200), min_size=1, max_size=10, unique=True),
       data=st.data(), cap=st.integers(1, 120))
def test_auto_never_exceeds_its_cap(ks, data, cap):
    ys = data.draw(st.lists(st.floats(0, 1), min_size=len(ks), max_size=len(ks)))
    pts = _points(ks, ys)
    if min(ks) > cap:
        with pytest.raises(StateseerError):
            choose_knee(pts, cap=cap)
        return
    k, why = choose_knee(pts, cap=cap)
    assert k <= cap and k in ks and "\n" not in why


def test_abstract_workflow_auto_stays_under_the_cap_and_records_its_curve(explored_run,
                                                                         copy_run):
    from stateseer.app.workflows.abstract import abstract_workflow

    run = copy_run(explored_run)
    notes: list[str] = []
    out = abstract_workflow(run, n_states="auto", cap=5, forcing=False, index=False,
                            log=notes.append)
    assert out["n_states"] <= 5 and out["auto"]["cap"] == 5
    assert any("validation" in n and "cap 5" in n for n in notes)
    auto = json.loads((run / "metrics.json").read_text())["abstraction"]["auto"]
    assert max(c["n_states"] for c in auto["curve"]) == 5 and auto["candidates"][-1] == 5
    assert all(c["split"] == "val" for c in auto["curve"])


def test_sweep_files_and_table(tmp_path):
    pts = [{"n_states": 4, "simulation_fidelity": 0.8, "simulation_fidelity_ci": [0.75, 0.85],
            "forcing_agreement": 0.9, "seconds": 1.5},
           {"n_states": 8, "simulation_fidelity": 0.85,
            "simulation_fidelity_ci": [0.8, 0.9], "forcing_agreement": None, "seconds": 2.0}]
    written = write_sweep(pts, tmp_path / "out", chosen=8)
    assert json.loads((tmp_path / "out" / "sweep.json").read_text()) == pts
    assert written["png"] and (tmp_path / "out" / "sweep.png").stat().st_size > 1000
    html = (tmp_path / "out" / "sweep.html").read_text()
    assert "<html>" in html and 'src="http' not in html  # self-contained: no CDN script
    table = sweep_table(pts).splitlines()
    assert len(table) == 3 and "0.800 [0.750, 0.850]" in table[1] and "—" in table[2]
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(StateseerError):
        write_sweep(pts, file / "sub")


def test_sweep_fits_the_features_once_and_matches_separate_fits(explored_run, monkeypatch):
    """Three candidates, one projection fit; each candidate's figures equal those of a
    sweep of that candidate alone (sharing changes nothing but the work)."""
    import stateseer.abstraction.abstractors.features as F
    from stateseer.app.workflows.sweep import sweep_run

    calls = []
    fit = F.Projection._fit.__func__

    def counting(cls, *args, **kwargs):
        calls.append(args[0])
        return fit(cls, *args, **kwargs)

    monkeypatch.setattr(F.Projection, "_fit", classmethod(counting))
    pts = sweep_run(explored_run, [3, 5, 8], split="val", forcing=False)
    assert len(calls) == 1 and [p["n_states"] for p in pts] == [3, 5, 8]
    alone = sweep_run(explored_run, [5], split="val", forcing=False)
    assert len(calls) == 2  # outside the block nothing is shared
    strip = lambda p: {k: v for k, v in p.items() if "seconds" not in k}  # noqa: E731
    assert strip(alone[0]) == strip(pts[1])
    # each point carries its baselines: chance agreement and Cohen's kappa
    for p in pts:
        assert 0 < p["simulation_chance"] <= 1
        assert p["simulation_kappa"] is None or -1 <= p["simulation_kappa"] <= 1
    from stateseer.app.workflows.sweep import sweep_table

    assert "chance" in sweep_table(pts).splitlines()[0]
    # in a notebook the sweep is a table: one row per candidate, in order
    page = pts._repr_html_()
    assert page.count("<tr>") == 1 + 3 and "<th>simulation fidelity</th>" in page
    assert [int(x) for x in re.findall(r"<tr><td>(\d+)</td>", page)] == [3, 5, 8]


def test_sweep_honours_the_simulation(explored_run):
    from stateseer.abstraction.pipeline import fresh_traces
    from stateseer.app.workflows.sweep import sweep_run
    from stateseer.rnn_models.run import ModelRun

    prob = sweep_run(explored_run, [6], split="val", forcing=False)[0]
    arg = sweep_run(explored_run, [6], split="val", forcing=False, simulation="argmax")[0]
    val = fresh_traces(ModelRun(explored_run))["val"]
    for p in (prob, arg):
        lo, hi = p["simulation_fidelity_ci"]
        assert lo <= p["simulation_fidelity"] <= hi
        assert p["simulation_fidelity"] * val.n_inputs == pytest.approx(
            round(p["simulation_fidelity"] * val.n_inputs), abs=0.06)


def test_projection_cache_keys_on_the_inputs():
    from stateseer.abstraction.abstractors.features import Projection, shared_projections

    rng = np.random.default_rng(0)
    S = rng.normal(size=(300, 6)).astype(np.float32)
    P = rng.dirichlet([1, 1, 1], size=300)
    with shared_projections() as cache:
        a = Projection.fit("margin", S, P, 1, 0)
        b = Projection.fit("margin", S, P, 1, 0)
        c = Projection.fit("margin", S + 1, P, 1, 0)   # another sample: fitted anew
        d = Projection.fit("margin", S, P, 2, 0)       # another parameter: fitted anew
        assert len(cache) == 3
    assert a.arrays["scale"] is not b.arrays["scale"]  # copies: a caller cannot spoil it
    assert all(np.array_equal(a.arrays[k], b.arrays[k]) for k in a.arrays)
    assert a.n_components == 2 + 2 and d.n_components == 2 + 4  # per logit difference
    assert not np.array_equal(a.arrays["mean"], c.arrays["mean"])
    e = Projection.fit("margin", S, P, 1, 0)  # outside the block: a fresh, equal fit
    assert all(np.array_equal(a.arrays[k], e.arrays[k]) for k in a.arrays)


# -- the explorer's sweep view -------------------------------------------------------------
def _sweep_points():
    return [{"n_states": 4, "simulation_fidelity": 0.8, "simulation_fidelity_ci": [0.75, 0.85],
             "forcing_agreement": 0.9, "seconds": 1.0},
            {"n_states": 12, "simulation_fidelity": 0.86,
             "simulation_fidelity_ci": [0.82, 0.9], "forcing_agreement": 0.93, "seconds": 2.0}]


def test_sweep_view_reads_the_sweep_file_then_the_auto_curve(tmp_path):
    from stateseer.app.explorer.views.sweep import sweep_curve, sweep_figure

    metrics = {"abstraction": {"n_states": 12, "simulation_fidelity": 0.85,
                               "auto": {"curve": [{"n_states": 8, "simulation_fidelity": 0.7},
                                                  {"n_states": 4, "simulation_fidelity": 0.6},
                                                  {"n_states": "x"}]}}}
    assert sweep_curve(tmp_path, {}) == ([], "none")
    pts, src = sweep_curve(tmp_path, metrics)
    assert src == "auto" and [p["n_states"] for p in pts] == [4, 8]  # sorted, junk skipped
    pts, src = sweep_curve(tmp_path, {"abstraction": {"n_states": 12,
                                                      "simulation_fidelity": 0.85}})
    assert src == "run" and pts[0]["simulation_fidelity"] == 0.85
    write_sweep(_sweep_points(), tmp_path / "sweep")
    pts, src = sweep_curve(tmp_path, metrics)
    assert src == "sweep" and [p["n_states"] for p in pts] == [4, 12]
    fig = sweep_figure(pts, 12)
    assert fig["data"][0]["error_y"]["array"] == pytest.approx([0.05, 0.04])
    assert fig["data"][1]["name"] == "forcing agreement"
    assert fig["layout"]["shapes"][0]["x0"] == 12  # the run's count marked
    (tmp_path / "sweep" / "sweep.json").write_text("not json")
    assert sweep_curve(tmp_path, metrics)[1] == "auto"


def test_sweep_view_renders_in_the_explorer(explored_run, tmp_path):
    import shutil

    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.registry import REGISTRY
    from stateseer.app.explorer.views import sweep
    from stateseer.app.main import create_app

    run = tmp_path / "run"
    shutil.copytree(explored_run, run)
    write_sweep(_sweep_points(), run / "sweep")
    ctx = ExplorerContext.load(run)
    registry = REGISTRY if "sweep" in REGISTRY.names() else REGISTRY.add(sweep.VIEW)
    app = create_app(context=ctx, registry=registry)
    page = json.dumps(app.layout().to_plotly_json(), default=lambda o: o.to_plotly_json()
                      if hasattr(o, "to_plotly_json") else str(o))
    assert sweep.SWEEP_GRAPH in page and "Fidelity vs states" in page
    assert "this run: 12" in page and "From `stateseer sweep`" in page
    assert "sweep" in registry.names()  # a study condition can leave it out


@pytest.fixture(scope="module")
def six_class_run(tmp_path_factory):
    import json as _json
    import random

    from stateseer import TrainConfig, record_run, train_run

    rng = random.Random(0)
    where = tmp_path_factory.mktemp("six")
    rows = []
    for i in range(900):
        c = i % 6
        words = [rng.choice("abcdefgh") for _ in range(rng.randint(2, 6))]
        words.insert(rng.randrange(len(words) + 1), f"k{c}")
        rows.append({"text": " ".join(words), "label": f"year{2010 + c}"})
    path = where / "d.jsonl"
    path.write_text("".join(_json.dumps(r) + "\n" for r in rows))
    run = train_run(TrainConfig(dataset=f"jsonl:{path}", arch="gru", epochs=4, hidden=16,
                                embed=16), where / "run", progress=False)
    record_run(run)
    return run.path


def test_too_few_states_for_the_classes_are_left_out_or_refused_before_any_work(
        six_class_run, monkeypatch):
    import stateseer.abstraction.pipeline as P
    from stateseer.abstraction.pipeline import fresh_traces, min_states
    from stateseer.app.workflows.sweep import sweep_run
    from stateseer.core.errors import StateseerError
    from stateseer.rnn_models.run import ModelRun
    from tests.conftest import one_line

    assert min_states(fresh_traces(ModelRun(six_class_run))) == 6
    said = []
    pts = sweep_run(six_class_run, split="val", forcing=False, log=said.append)
    assert [p["n_states"] for p in pts] == [8, 16, 32, 40]
    assert any("left out 4 states" in line for line in said)
    fits = []
    monkeypatch.setattr(P, "_fit_abstraction", lambda *a, **k: fits.append(1))
    with pytest.raises(StateseerError, match="at least 6 states") as e:
        sweep_run(six_class_run, [4, 8], split="val", forcing=False)
    one_line(e.value)
    with pytest.raises(StateseerError, match="at least 6 states"):
        P.abstract_run(six_class_run, n_states=4)
    assert fits == []  # refused before any fit
