"""The explorer's analyses (its services: nearest contexts, forcing, attribution; and run
comparison) on a real run. The workflows themselves are tested in ``tests/app/workflows``."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from stateseer.core.errors import StateseerError
from tests.conftest import one_line


def test_nearest_contexts_of_a_training_step_start_with_itself(analysed_run):
    from stateseer.app.explorer.context import ExplorerContext

    ctx = ExplorerContext.load(analysed_run)
    tr = ctx.data.trace_instance("train", 3)
    t = len(tr.tokens) - 1
    res = ctx.contexts.nearest(tr, t, k=5, window=2)
    top = res["rows"][0]
    assert top["distance"] == pytest.approx(0.0, abs=1e-4)
    assert top["token"] == tr.tokens[t] and top["state"] == tr.states[t + 1]
    assert len(top["left"]) <= 2 and len(top["right"]) <= 2
    s = res["summary"]
    assert s["k"] == 5 and sum(s["labels"].values()) == 5 and s["same_state"] >= 1
    # a typed input gets neighbours too, and an out-of-range step a clear error
    typed = ctx.models.trace_text("a wonderful , moving film")
    assert len(ctx.contexts.nearest(typed, 0, k=3)["rows"]) == 3
    with pytest.raises(StateseerError) as e:
        ctx.contexts.nearest(typed, 99)
    assert "does not exist" in one_line(e.value)
    xy = ctx.contexts.project(typed)
    assert xy.shape == (len(typed.tokens) + 1, 2)


def test_forcing_a_trace_and_attributing_it(analysed_run):
    from stateseer.app.explorer.context import ExplorerContext

    ctx = ExplorerContext.load(analysed_run)
    tr = ctx.data.trace_instance("test", 0)
    every = ctx.models.force(tr)
    assert len(every["proba"]) == len(tr.tokens) and all(every["forced"])
    one = ctx.models.force(tr, 1)
    assert one["forced"] == [t == 1 for t in range(len(tr.tokens))]
    np.testing.assert_allclose(one["proba"][0], tr.proba[0], atol=1e-5)
    att = ctx.models.attribution(tr, "ig", "contrastive")
    assert att is ctx.models.attribution(tr, "ig", "contrastive")  # cached
    assert len(att.scores) == len(tr.tokens)


def test_comparing_two_abstractions_of_the_same_run(copy_run, analysed_run, tmp_path):
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.app.workflows.comparison import RunComparison
    from stateseer.app.workflows.runview import RunView

    other = tmp_path / "other"
    shutil.copytree(analysed_run, other)
    abstract_run(other, n_states=8, random_state=3)
    here = RunView(analysed_run)
    cmp_ = RunComparison(here, RunView(other)).compare("test")
    s = cmp_["summary"]
    assert s["prediction_changed"] == 0 and s["fixed"] == s["broken"] == 0  # same model
    assert 0 < s["step_agreement"] <= 1
    tr = RunComparison(here, RunView(other)).other_trace("test", 0)
    assert tr.run == "other" and len(tr.states) == len(tr.states_own)
    # a run on other data is refused with one line that names the first differing input
    changed = RunView(copy_run(analysed_run))
    first = changed.traces["test"].texts[0]
    changed.traces["test"].texts[0] = "something else"
    with pytest.raises(StateseerError) as e:
        RunComparison(here, changed).compare("test")
    msg = one_line(e.value)
    assert "input" in msg and "something else" in msg and first[:10] in msg


def test_nearest_rows_have_unique_ids_even_from_one_input():
    from stateseer.app.explorer.views.nearest import nearest_list

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
