"""The typed trace record and the trace view's pure helpers."""

from __future__ import annotations

import json

from stateseer.app.explorer.views.trace import pattern_steps, state_differences
from stateseer.app.workflows.records import TraceRecord

TYPED = TraceRecord(text="good bad", tokens=("good", "bad"), known=(True, False),
                    proba=((0.2, 0.8), (0.9, 0.1)), initial_proba=(0.6, 0.4),
                    states=(0, 3, 5), simulated=(0, 3, 4), prediction=0,
                    final_proba=(0.9, 0.1))


def test_a_record_round_trips_through_a_store_as_json():
    row = TraceRecord(**{**TYPED.__dict__, "label": 1, "split": "test", "index": 4, "id": 40})
    for rec in (TYPED, row):
        store = json.loads(json.dumps(rec.to_store()))
        assert TraceRecord.from_store(store) == rec
    assert "index" not in TYPED.to_store() and TYPED.to_store()["label"] is None


def test_recorded_key_and_name():
    assert not TYPED.recorded and TYPED.key == "text:good bad"
    assert TYPED.name == "the typed input"
    row = TraceRecord(**{**TYPED.__dict__, "split": "test", "index": 0, "id": 7})
    assert row.recorded and row.key == "test:0" and row.name == "#7"
    other = row.renamed(lambda s: s + 10, run="other")
    assert other.states == (10, 13, 15) and other.states_own == row.states
    assert other.run == "other" and other.simulated == (10, 13, 14)


def test_pattern_steps_mark_every_occurrence_on_the_collapsed_path():
    # 3 → 5 occurs twice; staying in 3 for two steps is one occurrence
    assert pattern_steps([0, 3, 3, 5, 2, 3, 5], [3, 5]) == [1, 2, 3, 5, 6]
    assert pattern_steps([0, 3, 5], [5, 3]) == []
    assert pattern_steps([0, 1, 1, 1], [1]) == [1, 2, 3]
    assert pattern_steps([0, 1], []) == []


def test_state_differences_are_token_positions():
    assert state_differences([0, 1, 2, 3], [0, 1, 4, 3]) == [1]
    assert state_differences([0, 1], [0, 1, 2]) == []


def test_oversized_or_inconsistent_stores_are_refused():
    import pytest

    from stateseer.app.workflows.records import MAX_STORE_CHARS, MAX_STORE_TOKENS, StoreError

    store = TYPED.to_store()
    n = MAX_STORE_TOKENS + 1
    huge = {**store, "tokens": ["a"] * n, "known": [True] * n, "proba": [[0.5, 0.5]] * n,
            "states": [0] * (n + 1), "simulated": [0] * (n + 1)}
    for bad in (huge, {**store, "text": "a" * (MAX_STORE_CHARS + 1)},
                {**store, "proba": [[0.5, 0.5]] * 3}, {**store, "states": [0]},
                {**store, "tokens": "not a list"}, ["not", "a", "dict"]):
        with pytest.raises(StoreError, match="reload the page"):
            TraceRecord.from_store(bad)
    assert TraceRecord.from_store({**store, "states": [], "simulated": []}).has_states is False


def test_a_forged_store_makes_a_callback_do_nothing(ctx):
    import pytest
    from dash import Input, Output
    from dash.exceptions import PreventUpdate

    from stateseer.app.explorer.view import Callback
    from stateseer.app.explorer.views.core import active_of

    cb = Callback(lambda _ctx, active: active_of(active)[0].n_tokens,
                  [Output("x", "children")], [Input("active-trace", "data")])
    forged = {"main": {**TYPED.to_store(), "tokens": ["a"] * 10**6}}
    with pytest.raises(PreventUpdate):
        cb.bind(ctx)(forged)
    assert cb.bind(ctx)({"main": TYPED.to_store()}) == 2


def test_attribution_and_typed_inputs_are_bounded(ctx):
    import pytest

    from stateseer.app.explorer.services import MAX_ATTRIBUTION_TOKENS, MAX_INPUT_CHARS
    from stateseer.core.errors import StateseerError

    n = MAX_ATTRIBUTION_TOKENS + 1
    long = TraceRecord(text="a " * n, tokens=("a",) * n, known=(True,) * n,
                       proba=((0.5, 0.5),) * n, initial_proba=(0.5, 0.5),
                       states=(0,) * (n + 1), simulated=(0,) * (n + 1), prediction=0)
    with pytest.raises(StateseerError, match="attribution is limited"):
        ctx.models.attribution(long)
    with pytest.raises(StateseerError, match="shorten it"):
        ctx.models.trace_text("a" * (MAX_INPUT_CHARS + 1))
