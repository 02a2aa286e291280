"""How the views show what the user trial found hard to read: a long word, a punctuation
token, a long trace, the sweep tab's jobs, and the row the "edit" button copies."""

from __future__ import annotations

import dataclasses
import json

from dash import html, no_update

from stateseer.app.explorer.views import attribution, card, chart, compare, sweep
from stateseer.app.explorer.views.core import SHOWN_TOKEN_CHARS


def _texts(component) -> list[str]:
    """Every string in a component tree, in page order."""
    if isinstance(component, str):
        return [component]
    kids = getattr(component, "children", None)
    kids = kids if isinstance(kids, (list, tuple)) else [] if kids is None else [kids]
    return [t for k in kids for t in _texts(k)]


def _find(component, cls: str) -> list:
    """The components under ``component`` (itself included) whose class names ``cls``."""
    out = [component] if cls in (getattr(component, "className", "") or "").split() else []
    kids = getattr(component, "children", None)
    kids = kids if isinstance(kids, (list, tuple)) else [] if kids is None else [kids]
    return out + [c for k in kids if not isinstance(k, str) for c in _find(k, cls)]


def test_edit_copies_the_selected_rows_text_even_while_a_typed_trace_is_shown(ctx):
    """The row's text, whatever is on display (a typed trace stays while its row stays
    selected); nothing without a selected row."""
    row = ctx.data.trace_instance("test", 3)
    sel = {"split": "test", "state": None, "row": 3, "pattern": None, "pick": 1}
    assert compare.edit(ctx, 1, sel) == (row.text, ["on"])
    assert compare.edit(ctx, 1, {**sel, "row": None}) == (no_update, no_update)
    assert compare.edit(ctx, 1, None) == (no_update, no_update)
    assert compare.edit(ctx, 1, {**sel, "row": "x"}) == (no_update, no_update)  # forged


def test_a_long_word_is_cut_in_the_attribution_strip_and_named_whole_in_its_tooltip():
    long = "supercalifragilistic" * 12
    strip = attribution.attribution_strip(["a", long, "film"], [0.1, 0.5, -0.2],
                                          [[0], [1], [2]], ["neg", "pos"], target_class=1)
    seg = strip.children[1]
    assert seg.children == long[: SHOWN_TOKEN_CHARS - 1] + "…"
    assert long in seg.title
    assert [s.children for s in strip.children[::2]] == ["a", "film"]  # short ones: whole
    # a segment of several tokens cuts each long one, and keeps the others
    joined = attribution.attribution_strip(["a", long, "film"], [0.3], [[0, 1, 2]],
                                           ["neg", "pos"], target_class=1).children[0]
    assert joined.children == f"a {long[:SHOWN_TOKEN_CHARS - 1]}… film"


def test_blank_and_empty_tokens_show_as_a_visible_mark_in_the_strip_and_the_card():
    """A space token or an empty one (a character model's, a byte tokenizer's) shows as
    "␣", never as an invisible chip, in the attribution strip as on the card."""
    from stateseer.app.explorer.views import card

    strip = attribution.attribution_strip(["a", " ", ""], [0.1, 0.5, -0.2],
                                          [[0], [1], [2]], ["neg", "pos"], target_class=1)
    assert [s.children for s in strip.children] == ["a", "␣", "␣"]
    assert "''" in strip.children[2].title  # the tooltip quotes the token as it is
    assert [c.children for c in card.edge_tokens(["a", " ", ""]).children] == ["a", "␣", "␣"]


def test_a_long_trace_labels_every_kth_step_under_the_chart(ctx):
    main = ctx.data.trace_instance("test", 1)
    n = 3 * chart.MAX_TICKS + 5
    tokens = tuple(f"w{i}" for i in range(n))
    long = dataclasses.replace(
        main, tokens=tokens, known=(True,) * n, states=(0,) * (n + 1),
        proba=(tuple(main.proba[0]),) * n, simulated=(0,) * (n + 1))
    axis = chart.probability_figure(long, ctx.data.classes)["layout"]["xaxis"]
    steps = axis["tickvals"]
    assert steps[0] == 0 and len(steps) <= chart.MAX_TICKS
    stride = steps[1] - steps[0]
    assert stride > 1 and steps == list(range(0, n + 1, stride))
    assert axis["ticktext"] == ["⟨start⟩", *(f"w{t - 1}" for t in steps[1:])]
    # a short trace keeps a label per step
    short = chart.probability_figure(main, ctx.data.classes)["layout"]["xaxis"]
    assert short["tickvals"] == list(range(main.n_tokens + 1))


def test_the_state_cards_transitions_show_each_token_in_its_own_chip(ctx):
    chips = card.edge_tokens([",", "and", " ", "-"])
    assert [c.children for c in chips.children] == [",", "and", "␣", "-"]
    assert all(isinstance(c, html.Code) and c.className == "edge-tok"
               for c in chips.children)
    assert [c.title for c in chips.children] == ["','", "'and'", "' '", "'-'"]
    # no separator a punctuation token could be read as
    assert not [t for t in _texts(chips) if t not in (",", "and", "␣", "-")]
    fsm = ctx.data.abstraction.fsm
    state = max(range(1, fsm.n_states), key=lambda s: fsm.visits[s])
    body = card.state_card(fsm, state, ctx.data.abstraction.patterns)
    rows = _find(body, "edge-toks")
    assert rows and all(_find(r, "edge-tok") for r in rows)


def test_the_sweep_label_of_the_runs_count_stays_inside_the_figure():
    pts = [{"n_states": k, "simulation_fidelity": 0.9, "simulation_fidelity_ci": None,
            "forcing_agreement": None} for k in (4, 8, 40)]
    for chosen, side in ((40, "right"), (4, "left"), (8, "center"), (50, "right")):
        lay = sweep.sweep_figure(pts, chosen)["layout"]
        (note,) = lay["annotations"]
        assert note["text"] == f"this run: {chosen}" and note["xanchor"] == side
        assert lay["margin"]["t"] == sweep.TOP_MARGIN >= 40  # the toolbar, then the label


def test_the_sweep_tab_shows_the_right_total_from_the_start(ctx):
    total = sweep.expected_candidates(ctx.data.traces, ctx.data.has_predictions)
    from stateseer.app.workflows.sweep import DEFAULT_STATES

    assert 1 <= total <= len(DEFAULT_STATES)
    base = {"state": "running", "kind": "sweep", "seconds": 1.0}
    starting = {**base, "stage": "starting", "done": 0, "total": 1,
                "info": {"candidates": total}}
    line, bar = sweep.job_status(starting)
    assert line.children == f"stateseer sweep: starting (0/{total} candidates), 1 s"
    assert bar.max == str(total) and bar.value == "0"
    # the sweep's own count once it wrote one
    line, bar = sweep.job_status({**base, "stage": "8 states", "done": 1, "total": 4,
                                  "info": {"candidates": total}})
    assert line.children == "stateseer sweep: 8 states (1/4 candidates), 1 s"
    # not known: no count at all, an indeterminate bar (never "0/1")
    line, bar = sweep.job_status({**starting, "info": {}})
    assert line.children == "stateseer sweep: starting, 1 s"
    assert getattr(bar, "max", None) is None
    assert "0/1" not in json.dumps(line.to_plotly_json())


def test_the_sweep_job_is_started_with_its_expected_total(ctx, monkeypatch):
    from stateseer.app.explorer import ids
    from stateseer.app.explorer.view import Trigger

    started = {}

    class Jobs:
        def start(self, kind, argv, *, info=None):
            started.update(kind=kind, info=info)

        def status(self):
            return {"state": "running", "kind": "sweep", "seconds": 0.0, "stage": "starting",
                    "done": 0, "total": 1, "info": started["info"]}

    live = dataclasses.replace(ctx, jobs=Jobs())
    status, *_ = sweep.sweep_job(live, Trigger(ids.SWEEP_START, 1), 1, 0, 0, 0)
    n = sweep.expected_candidates(ctx.data.traces)
    assert started == {"kind": "sweep", "info": {"candidates": n}}
    assert f"(0/{n} candidates)" in status[0].children


def test_the_strip_says_what_its_marks_mean():
    """The outline where the prediction turns is named under the strip (it was only in a
    tooltip), and only where a token turns it; a run without predictions names neither
    the colour nor the outline."""
    import numpy as np

    from stateseer.app.explorer.views.trace import strip_legend
    from stateseer.app.workflows.records import TraceRecord

    def rec(proba):
        n = len(proba)
        return TraceRecord(text="a " * n, tokens=("a",) * n, known=(True,) * n,
                           proba=tuple(map(tuple, proba)), initial_proba=(0.5, 0.5),
                           states=tuple(range(n + 1)), simulated=tuple(range(n + 1)),
                           prediction=int(np.argmax(proba[-1])))

    turns = strip_legend(rec([[0.9, 0.1], [0.2, 0.8]])).children
    assert "outlined: the prediction turns here" in turns and "abstract state" in turns
    assert "outlined" not in strip_legend(rec([[0.9, 0.1], [0.8, 0.2]])).children
    assert strip_legend(rec([[0.5, 0.5]]), predictions=False).children == \
        "number: the abstract state after the token (blue: the token clicked)"


def test_the_clicked_tokens_chip_is_marked_and_the_others_are_plain():
    from stateseer.app.explorer.views.trace import mark_step

    chips = [{"type": "token", "index": t} for t in range(4)]
    assert mark_step(None, 2, None, chips) == ["chip", "chip", "chip chip-step", "chip"]
    assert mark_step(None, None, None, chips) == ["chip"] * 4
    assert mark_step(None, 0, None, []) == []


def test_a_class_loss_within_the_controls_move_is_no_alarm():
    """The repair result's red "lost more than a point" contradicted the control line under
    it: a loss no larger than what retraining alone moves a class is said plainly."""
    from stateseer.app.explorer.views.findings import _hurt_line

    doc = {"classes_hurt": ["neg"], "per_class_delta": {"neg": -0.014, "pos": 0.05},
           "control": {"per_class_delta": {"neg": 0.019, "pos": -0.01}}}
    (line,) = _hurt_line(doc)
    assert line.className == "muted" and "within what retraining alone" in line.children
    (alarm,) = _hurt_line({**doc, "per_class_delta": {"neg": -0.05, "pos": 0.05}})
    assert alarm.className == "wrong"
    (bare,) = _hurt_line({**doc, "control": None})
    assert bare.className == "wrong"
    assert _hurt_line({**doc, "classes_hurt": []}) == []


def test_the_compare_list_says_how_many_it_leaves_out():
    import numpy as np

    from stateseer.app.explorer.views.compare import compare_panel

    n = 20

    class Matching:
        def pairs(self):
            return [{"a": 0, "b": 0, "jaccard": 1.0, "steps_a": 1, "steps_b": 1}] * 2

    cmp_ = {"summary": {"name_a": "a", "name_b": "b", "n_inputs": n, "split": "test",
                        "accuracy_a": 0.5, "accuracy_b": 0.6, "fixed": 2, "broken": 1,
                        "prediction_changed": 3, "step_agreement": 0.5, "path_changed": n},
            "changed": {"n_steps": np.full(n, 4), "n_diff": np.arange(n) % 4 + 1,
                        "path_changed": np.ones(n, bool),
                        "prediction_changed": np.arange(n) < 3},
            "matching": Matching(), "pred_b": np.ones(n, int)}
    panel = compare_panel(cmp_, ["t"] * n, np.zeros(n, int), np.zeros(n, int), ["x", "y"],
                          limit=5)
    heading = panel.children[1].children
    assert heading.endswith("(the first 5 of 20: changed predictions first, then the most "
                            "steps that differ)")
    assert len(panel.children[2].children) == 5
    full = compare_panel(cmp_, ["t"] * n, np.zeros(n, int), np.zeros(n, int), ["x", "y"],
                         limit=50)
    assert full.children[1].children == "Inputs whose path or prediction changed"
