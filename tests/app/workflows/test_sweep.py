"""The state-count sweep (app.workflows.sweep): intervals, the knee, files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.workflows.sweep import bootstrap_ci, choose_knee, sweep_table, write_sweep
from rnn_models.errors import StateseerError


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


def test_auto_states_on_a_run_stays_under_the_cap(explored_run):
    from app.workflows.sweep import auto_states

    k, why, curve = auto_states(explored_run, cap=5, candidates=(2, 3, 8, 12))
    assert k <= 5 and [c["n_states"] for c in curve] == [2, 3, 5]
    assert "validation" in why
    assert all(c["forcing_agreement"] is None for c in curve)  # not measured for auto


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
