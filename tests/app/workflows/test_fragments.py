"""A trace as HTML chips and an inline chart: states under the tokens (none for a record
stripped of them), every token escaped."""

from __future__ import annotations

import re

from stateseer.app.workflows.fragments import probability_svg, token_chips, trace_fragment


def test_chips_carry_the_states_and_escape_the_tokens(explored_run):
    from dataclasses import replace

    from stateseer.app.workflows.runview import RunView

    rv = RunView(explored_run)
    tr = replace(rv.trace_instance("test", 2), tokens=("<b>", *rv.trace_instance(
        "test", 2).tokens[1:]))
    chips = token_chips(tr, list(rv.classes))
    assert chips.count("&lt;b&gt;") == 1 and ">&lt;b&gt;<" in chips
    assert [int(s) for s in re.findall(r"class='st'>s(\d+)<", chips)] == list(tr.states[1:])
    bare = token_chips(tr.without_states(), list(rv.classes))
    assert "class='st'" not in bare and bare.count("class='tok") == tr.n_tokens
    page = trace_fragment(tr)  # no class names given: numbered
    assert "class 0" in page and page.count("<polyline") == 2


def test_the_chart_has_one_line_per_class_over_every_step():
    proba = [[0.5, 0.5], [0.2, 0.8], [0.9, 0.1]]
    import numpy as np

    svg = probability_svg(np.array(proba), ["a", "<script>"], ["neg", "pos"])
    lines = re.findall(r"points='([^']*)'", svg)
    assert len(lines) == 2 and all(len(pts.split()) == 3 for pts in lines)
    assert "<script>" not in svg and ">&lt;script&gt;</text>" in svg
