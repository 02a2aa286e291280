"""Class colours for many classes, the diagram's legend and buggy patterns by confusion."""

from __future__ import annotations

import itertools
import json

import numpy as np

from stateseer.app.explorer.palette import (
    COMPARE_COLOR,
    PALETTE,
    PATH_COLOR,
    SELECTED_COLOR,
    class_color,
    delta_e,
    mix_color,
)


def test_twenty_classes_are_distinct_and_never_the_path_colour():
    colours = [class_color(k, 20) for k in range(20)]
    assert len(set(colours)) == 20 and colours == list(PALETTE)
    assert min(delta_e(a, b) for a, b in itertools.combinations(colours, 2)) > 20
    for c in colours:
        for other in (PATH_COLOR, COMPARE_COLOR, SELECTED_COLOR, "#f7f7f7"):
            assert delta_e(c, other) > 20, (c, other)


def test_two_classes_keep_the_diverging_scale():
    from stateseer.abstraction import colors

    assert class_color(0, 2) == colors.class_color(0, 2)
    assert mix_color([0.3, 0.7]) == colors.mix_color([0.3, 0.7])
    sure, unsure = mix_color([0.0, 0.0, 1.0]), mix_color([0.2, 0.3, 0.5])
    assert sure == PALETTE[2] and unsure != sure


def _json(c):
    return json.dumps(c.to_plotly_json(), default=lambda o: o.to_plotly_json(),
                      ensure_ascii=False)


def test_the_legend_has_a_swatch_per_class_beyond_two():
    from stateseer.app.explorer.views.diagram import _legend

    classes = [f"c{k}" for k in range(20)]
    legend = _json(_legend(classes))
    assert legend.count('"sw"') == 20
    for k in range(20):
        assert PALETTE[k] in legend
    assert '"sw"' not in _json(_legend(["neg", "pos"]))


def test_buggy_patterns_are_grouped_by_confusion_pair_with_their_q_value():
    from stateseer.abstraction.analysis.patterns import confusion_pair
    from stateseer.app.explorer.views.patterns import pattern_list

    labels, pred = np.array([0, 1, 2, 2, 0]), np.array([1, 2, 1, 1, 0])
    items = [{"states": [1, 2], "support": 3, "n_inputs": 4, "lift": 2.0, "q_value": 0.01,
              "phrases": [], "inputs": [2, 3]},
             {"states": [2, 3], "support": 3, "n_inputs": 5, "lift": 1.5, "q_value": 0.2,
              "phrases": [], "inputs": [0]},
             {"states": [3, 4], "support": 3, "n_inputs": 5, "lift": 1.4, "q_value": 0.3,
              "phrases": [], "inputs": [3]}]
    pairs = [confusion_pair(p, labels, pred) for p in items]
    assert pairs == [(2, 1), (0, 1), (2, 1)]
    out = _json(pattern_list(items, "buggy", ["a", "b", "c"], pairs=pairs))
    assert out.index("gold c → predicted b · 2 patterns") < out.index("gold a → predicted b")
    assert "q 1.0e-02" in out and "(not significant)" in out
    assert "None significant" not in out
    weak = [{**p, "q_value": 0.5} for p in items]
    assert "None significant at q < 0.05" in _json(
        pattern_list(weak, "buggy", ["a", "b", "c"], pairs=pairs))


def test_the_header_leads_with_simulation_fidelity_and_marks_label_fidelity(ctx, monkeypatch):
    from stateseer.app.explorer import page
    from stateseer.app.workflows.runview import RunView

    metrics = {"test_accuracy": 0.8, "abstraction": {
        "n_states": 12, "label_fidelity": 1.0, "by_construction": ["label_fidelity"],
        "simulation_fidelity": 0.912, "simulation_fidelity_ci": [0.9, 0.93],
        "forcing_agreement": 0.88}}
    monkeypatch.setattr(RunView, "metrics", property(lambda self: metrics))
    text = page.header(ctx).children[2].children
    assert text == ("simulation fidelity 0.912 (95 % CI 0.900–0.930) · forcing agreement "
                    "0.880 · label fidelity 1.000 (by construction)")
    metrics["abstraction"] = {"label_fidelity": 0.9, "simulation_fidelity": 0.8}
    assert page.header(ctx).children[2].children == ("simulation fidelity 0.800 · "
                                                     "label fidelity 0.900")
    assert "test acc 0.800 ·" in page.header(ctx).children[1].children
    # a run made with `create` (no training): the accuracy recording measured, never 0
    del metrics["test_accuracy"]
    recorded = ctx.data.traces.meta["splits"]["test"]["accuracy"]
    assert f"test acc {recorded:.3f} ·" in page.header(ctx).children[1].children
    splits = ctx.data.traces.meta["splits"]
    monkeypatch.setitem(ctx.data.traces.meta, "splits", {"train": splits["train"]})
    assert "test acc n/a ·" in page.header(ctx).children[1].children
