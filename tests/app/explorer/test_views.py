"""The views' callbacks as plain functions: data in, data and components out, no browser."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest
from dash import no_update

from stateseer.abstraction.automata import layout
from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Trigger
from stateseer.app.explorer.views import chart, core, diagram, patterns, table, trace
from stateseer.app.selection import pattern_items
from stateseer.app.workflows.records import TraceRecord

SEL0 = {"split": "test", "state": None, "row": None, "pattern": None}


def _table(ctx, sel, search="", regex=None, shown=None):
    """update_table's rows, page count, message and chips (not its key and page)."""
    return table.update_table(ctx, sel, search, regex or [], None, None, None, 0, [],
                              shown)[:4]


def test_a_row_click_leaves_the_table_and_the_card_alone_and_marks_the_row(ctx):
    from stateseer.app.explorer.views import card

    s = int(np.bincount(ctx.data.abstraction.states["test"]).argmax())
    sel = {**SEL0, "state": s}
    *shown, key, _page = table.update_table(ctx, sel, "", [], None, None, None, 0, [],
                                            None)
    rows = shown[0]
    picked = table.select_row(ctx, {"row": 1, "column_id": "text"}, sel, rows)[0]
    again = table.update_table(ctx, picked, "", [], None, None, None, 0, [], key)
    assert again[:4] == (no_update,) * 4  # rows, page count, message, chips: unchanged
    assert again[4] == {**key, "row": rows[1]["index"]} and again[5] is no_update
    assert table.marked_row(ctx, picked, rows) == 1  # the page marks it (no re-render)
    assert table.marked_row(ctx, sel, rows) is None
    # nothing the table shows changed (a pattern outside it would do that): no update
    assert table.update_table(ctx, picked, "", [], None, None, None, 0, [], again[4]) == \
        (no_update,) * 6
    # another filter sends the rows again
    assert table.update_table(ctx, picked, "a", [], None, None, None, 0, [], again[4])[0] \
        is not no_update
    # the state card: drawn once for the state, not again for a row click in it
    body, tab, card_key = card.show_card(ctx, Trigger(ids.SELECTION), sel, ids.TAB_BUGGY)
    assert card_key == s and tab == ids.TAB_CARD and body.className == "card-body"
    assert card.show_card(ctx, Trigger(ids.SELECTION), picked, ids.TAB_CARD, s) == \
        (no_update,) * 3
    prompt, _, none = card.show_card(ctx, Trigger(ids.SELECTION), SEL0, ids.TAB_CARD, s)
    assert none is None and "muted" in prompt.className


def test_a_selected_input_off_the_page_turns_the_table_to_its_page(ctx):
    """A row selected from outside the table (the URL, the nearest contexts) is shown:
    the table turns to its page; paging away by hand afterwards is not undone."""
    n = ctx.data.traces["test"].n_inputs
    target = n - 1  # the last input: on the last page, unsorted
    sel = {**SEL0, "row": target}
    rows, _, _, _, key, page = table.update_table(ctx, sel, "", [], None, None, None,
                                                         0, [], None)
    assert page == (n - 1) // table.PAGE_SIZE > 0
    assert any(r["index"] == target for r in rows)
    assert rows[table.marked_row(ctx, sel, rows)]["index"] == target  # marked there
    # the user pages back to the first page: the selection is the same, no jump
    again = table.update_table(ctx, sel, "", [], None, None, None, 0, [], key)
    assert again[5] is no_update and all(r["index"] != target for r in again[0])
    # filtered out (a label it does not have): the table stays where it is
    label = ctx.data.classes[int(ctx.data.traces["test"].labels[target])]
    other = next(c for c in ctx.data.classes if c != label)
    out = table.update_table(ctx, {**SEL0, "row": target}, "", [], other, None, None, 0, [],
                             None)
    assert out[5] is no_update


def test_filters_that_empty_the_page_send_the_pager_back_to_the_first_page(ctx):
    """Page 7 of everything, then a filter that leaves fewer rows: the first page's rows
    and the pager on it (not left at page 7 over page 1's rows)."""
    rows, *_rest, key, page = table.update_table(ctx, SEL0, "", [], None, None, None, 7, [],
                                                 None)
    assert page is no_update and key["page"] == 7
    rows, *_rest, key, page = table.update_table(ctx, SEL0, "", [], None, None, "wrong", 7,
                                                 [], key)
    assert page == 0 and key["page"] == 0 and rows


def test_the_study_log_tells_paging_from_turns_the_explorer_made():
    from stateseer.app.study.events import page_turned_by_app

    # the table turned itself to page 4: the key in the same response names page 4
    assert page_turned_by_app(4, {"query": "...", "row": 50, "page": 4})
    # the participant clicked "next" from page 4: the key still names page 4
    assert not page_turned_by_app(5, {"query": "...", "row": 50, "page": 4})
    assert not page_turned_by_app(2, None)


def test_state_click_selects_it_and_filters_the_table(ctx):
    states = ctx.data.abstraction.states["test"]
    s = int(np.bincount(states).argmax())
    sel, url = diagram.tap(ctx, {"state": s}, SEL0)
    assert sel["state"] == s and url == f"?split=test&state={s}"
    rows, n_pages, msg, chips = _table(ctx, sel)
    tr = ctx.data.traces["test"]
    through = {int(tr.step_input[j]) for j in np.flatnonzero(states == s)}
    assert msg == "" and {r["index"] for r in rows} <= through and len(rows) == 12
    assert n_pages == -(-len(through) // 12)
    assert chips[0].children == f"through state {s}"
    assert chips[-1].children == f"{len(through):,} of {tr.n_inputs:,} inputs"
    # a second click unselects; clear keeps the split
    assert diagram.tap(ctx, {"state": s}, sel)[0]["state"] is None
    assert diagram.clear(ctx, 1, {**sel, "row": 3})[0] == SEL0


def test_row_click_shows_that_rows_trace_record(ctx):
    rows, *_ = _table(ctx, SEL0)
    sel, url = table.select_row(ctx, {"row": 2, "column_id": "text"}, SEL0, rows)
    assert sel["row"] == rows[2]["index"] and "row=" in url
    active, msg = core.choose_trace(ctx, Trigger(ids.SELECTION), sel, 0, None, "", [], None)
    main, other = core.active_of(active)
    assert msg == "" and other is None and main.recorded and main.id == rows[2]["id"]
    assert main.text == rows[2]["text"] and len(main.states) == main.n_tokens + 1
    json.dumps(active)  # what goes into dcc.Store is JSON
    title, strips = trace.show_trace(ctx, active, sel)
    assert title[0].children == f"#{main.id} "
    assert [c.children[0].children for c in strips[0].children[1:]] == list(main.tokens)
    fig = chart.show_chart(ctx, active, None)
    assert len(fig["data"]) >= 1 and fig["data"][0]["x"][0] == 0
    assert chart.show_chart(ctx, None, None) == chart.EMPTY_FIGURE  # no trace: one line
    # a click on a row beyond the page does nothing
    assert table.select_row(ctx, {"row": 99}, SEL0, rows) == (no_update, no_update)


def test_typed_input_is_traced_and_kept_when_the_selection_changes(ctx):
    trig = Trigger(ids.TRACE_BTN, 1)
    active, msg = core.choose_trace(ctx, trig, SEL0, 1, None, "a zorblaxian film", [], None)
    main, _ = core.active_of(active)
    assert not main.recorded and main.tokens == ("a", "zorblaxian", "film")
    assert msg == "1 unknown word(s): zorblaxian"
    assert core.choose_trace(ctx, trig, SEL0, 1, None, "  ", [], None)[1] == \
        "Type some text first."
    # selecting a state (no row) keeps the typed trace on display
    sel = {**SEL0, "state": 2}
    assert core.choose_trace(ctx, Trigger(ids.SELECTION), sel, 1, None, "", [],
                             active) == (no_update, no_update)
    # ... and so it does while a row picked before the typing stays selected
    rows, *_ = _table(ctx, SEL0)
    picked = table.select_row(ctx, {"row": 2, "column_id": "text"}, SEL0, rows)[0]
    typed, _ = core.choose_trace(ctx, trig, picked, 1, None, "a fine film", [], None)
    assert core.choose_trace(ctx, Trigger(ids.SELECTION), {**picked, "state": 2}, 1, None,
                             "", [], typed) == (no_update, no_update)
    # picking a row, the same one again included, shows that row
    again = table.select_row(ctx, {"row": 2, "column_id": "text"}, picked, rows)[0]
    assert again["row"] == picked["row"] and again["pick"] == picked["pick"] + 1
    shown, _ = core.choose_trace(ctx, Trigger(ids.SELECTION), again, 1, None, "", [], typed)
    assert core.active_of(shown)[0].recorded and core.active_of(shown)[0].index == again["row"]
    # typed with "compare" ticked: compared with the selected row
    row_sel = {**SEL0, "row": 0}
    active, _ = core.choose_trace(ctx, trig, row_sel, 2, None, "a film", ["on"], active)
    main, other = core.active_of(active)
    assert other.recorded and other.index == 0 and main.text == "a film"
    _title, strips = trace.show_trace(ctx, active, row_sel)
    assert len(strips) == 3 and "compare-note" in strips[1].className


def test_pattern_click_selects_it_and_marks_its_steps(ctx):
    items = pattern_items(ctx.data.abstraction.patterns, "buggy", "test") or \
        pattern_items(ctx.data.abstraction.patterns, "influential", "test")
    kind = "buggy" if pattern_items(ctx.data.abstraction.patterns, "buggy",
                                             "test") else "influential"
    assert items, "the explored run has patterns"
    trig = Trigger(ids.pattern(kind, 0), 1)
    sel, url = patterns.select_pattern(ctx, trig, [1], "test", SEL0)
    assert sel["pattern"] == {"kind": kind, "index": 0, "states": items[0]["states"]}
    assert f"pattern={kind}%3A0" in url
    rows, _, _, chips = _table(ctx, sel)
    assert chips[0].children.startswith("pattern ")
    # an input with the pattern shows its steps marked in the strip
    active, _ = core.choose_trace(ctx, Trigger(ids.SELECTION), {**sel, "row": rows[0]["index"]},
                                  0, None, "", [], None)
    _, strips = trace.show_trace(ctx, active, sel)
    marked = [c for c in strips[0].children if "st-pattern" in c.children[1].className]
    assert marked
    # a re-rendered button (n_clicks 0) is no click; a second click unselects
    assert patterns.select_pattern(ctx, Trigger(ids.pattern(kind, 0), 0), [0], "test",
                                   SEL0) == (no_update, no_update)
    assert patterns.select_pattern(ctx, trig, [2], "test", sel)[0]["pattern"] is None


def test_token_click_selects_the_step_and_marks_its_state(ctx):
    active = core.active_store(ctx.data.trace_instance("test", 1))
    main = TraceRecord.from_store(active["main"])
    step, state = trace.click_token(ctx, Trigger(ids.token(1), 1), [0, 1], active)
    assert (step, state) == (1, main.states[2])
    assert trace.click_token(ctx, Trigger(ids.ACTIVE_TRACE), [], active, 3) == (None, no_update)
    assert trace.click_token(ctx, Trigger(ids.ACTIVE_TRACE), [], active) == (no_update,) * 2


def test_a_second_run_gets_a_tab_and_its_traces_are_compared(explored_run, tmp_path):
    import shutil

    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.registry import REGISTRY
    from stateseer.app.explorer.views import compare

    other = tmp_path / "other"
    shutil.copytree(explored_run, other)
    abstract_run(other, n_states=8, random_state=3)
    both = ExplorerContext.load(explored_run, compare=other)
    panel = compare.comparison(both, SEL0)
    buttons = [b for b in _walk(panel) if getattr(b, "className", "") == "cmp-btn"]
    assert "explored vs other" in str(panel.children[0].children[0].children)
    # a changed input's button selects it; its trace is compared with the other run's
    if buttons:
        trig = Trigger(buttons[0].id, 1)
        sel, _ = compare.open_changed(both, trig, [1], SEL0)
        assert sel["row"] == buttons[0].id["index"]
    sel = {**SEL0, "row": 0}
    active, _ = core.choose_trace(both, Trigger(ids.SELECTION), sel, 0, None, "", [], None)
    main, theirs = core.active_of(active)
    assert theirs.run == "other" and len(theirs.states) == len(main.states)
    tabs = next(c for c in _walk(REGISTRY.layout(both)) if getattr(c, "id", None) ==
                ids.SIDE_TABS)
    assert ids.TAB_COMPARE in [t.value for t in tabs.children]


def _walk(c):
    yield c
    kids = getattr(c, "children", None)
    for k in kids if isinstance(kids, list) else [kids] if kids is not None else []:
        if hasattr(k, "to_plotly_json"):
            yield from _walk(k)


def test_an_unchanged_trace_is_not_written_again(ctx):
    """A state click with a row selected keeps the same trace: the store is left alone
    (rewriting it would redraw every view that follows the trace)."""
    sel = {**SEL0, "row": 1}
    active, _ = core.choose_trace(ctx, Trigger(ids.SELECTION), sel, 0, None, "", [], None)
    same = json.loads(json.dumps(active))  # as the page sends it back
    again, msg = core.choose_trace(ctx, Trigger(ids.SELECTION), {**sel, "state": 2}, 0,
                                   None, "", [], same)
    assert again is no_update and msg == ""
    # a pattern selected: the same trace, but its steps are to be marked
    pat = {"kind": "buggy", "index": 0, "states": [1, 2]}
    marked, _ = core.choose_trace(ctx, Trigger(ids.SELECTION), {**sel, "pattern": pat}, 0,
                                  None, "", [], same)
    assert marked["pattern"] == [1, 2] and marked["main"] == active["main"]
    # no row, nothing on display: nothing to write either
    assert core.choose_trace(ctx, Trigger(ids.SELECTION), SEL0, 0, None, "", [], None) == \
        (no_update, "")


def test_a_new_trace_drops_the_forced_run_only_when_there_is_one(ctx):
    from stateseer.app.explorer.views import forcing

    assert forcing.reset(ctx, {"main": {}}, {"key": "x"}) == (None, "")
    assert forcing.reset(ctx, {"main": {}}, None) == (no_update, "")


def test_the_chart_is_a_plain_figure_dict(ctx):
    main = ctx.data.trace_instance("test", 1)
    fig = chart.probability_figure(main, ctx.data.classes)
    json.dumps(fig)  # plain data, no plotly objects
    curve = fig["data"][0]
    assert curve["type"] == "scatter" and len(curve["x"]) == main.n_tokens + 1
    assert [c[0] for c in curve["customdata"]] == ["⟨start⟩", *main.tokens]
    import plotly.graph_objects as go

    assert len(go.Figure(fig).data) == len(fig["data"])  # valid for plotly


def test_the_chart_margins_come_from_its_labels_and_a_long_token_is_cut_under_the_axis(ctx):
    """plotly's automargin (a second layout pass) and its "hide past div" label check (every
    label measured once per label) are off; the bottom margin is sized for the longest tick
    instead, and a token too long for it is cut there while its hover names it whole."""
    main = ctx.data.trace_instance("test", 1)
    short = chart.probability_figure(main, ctx.data.classes)["layout"]
    long_token = "x" * 60
    tr = dataclasses.replace(main, tokens=[long_token, *main.tokens[1:]])
    fig = chart.probability_figure(tr, ctx.data.classes)
    lay = fig["layout"]
    assert lay["xaxis"]["automargin"] is False and lay["yaxis"]["automargin"] is False
    assert lay["xaxis"]["ticklabeloverflow"] == "allow"
    tick = lay["xaxis"]["ticktext"][1]
    assert tick.endswith("…") and len(tick) == chart.TICK_CHARS
    assert fig["data"][0]["customdata"][1][0] == long_token
    assert short["margin"]["b"] < lay["margin"]["b"] <= 24 + chart.TICK_PX * chart.TICK_CHARS

def test_fixed_layout_fills_the_frame_and_no_state_hides_another(ctx):
    """The default ("preset") diagram: every pair of states drawn apart at their sizes
    (the start diamond included), inside the frame, fresh on the right."""
    fsm = ctx.data.abstraction.fsm
    pos = layout.fixed_positions(fsm)
    xy = np.array([pos[s] for s in range(fsm.n_states)])
    r = layout.node_size(fsm.visits) / 2
    gap = np.sqrt(((xy[:, None] - xy[None]) ** 2).sum(-1)) - r[:, None] - r[None]
    np.fill_diagonal(gap, np.inf)
    assert gap.min() >= 7.9
    half = np.array(layout.FRAME)  # 12 states: room enough, the frame is not enlarged
    assert (np.abs(xy) <= half + 1e-6).all()
    assert (np.ptp(xy, axis=0) > half).all()  # both axes used, not a strip
    if fsm.prediction.shape[1] == 2:
        assert np.corrcoef(xy[:, 0], fsm.prediction[:, 1])[0, 1] > 0
    assert layout.fixed_positions(fsm) == pos  # stable
    sizes = {e["data"]["state"]: e["data"]["size"]
             for e in diagram.diagram_elements(fsm, positions=pos) if "state" in e["data"]}
    assert sizes == {s: float(layout.node_size(fsm.visits)[s]) for s in range(fsm.n_states)}


def test_repairs_are_buttons_only_where_the_page_may_start_jobs(ctx, tmp_path, monkeypatch):
    import dataclasses
    import sys

    from stateseer.app.explorer.views import findings
    from stateseer.app.workflows.jobs import JobRunner

    f = {"rank": 2, "kind": "sequence", "tokens": ["not", "good"], "description": "d",
         "q_value": 1e-5, "error_rate_with": 0.9, "error_rate_without": 0.2,
         "significant": True, "intervention": None, "actions": ["relabel", "drop"]}
    shown = findings.finding_card(f, ["neg", "pos"], {}, can_repair=False)
    assert "repairs that fit: relabel, drop" in json.dumps(shown.to_plotly_json(),
                                                           default=str)
    card = findings.finding_card(f, ["neg", "pos"], {}, can_repair=True)
    buttons = [c for c in card.children[-1].children if hasattr(c, "id")]
    assert [b.id for b in buttons] == [ids.repair_start(2, "relabel"),
                                       ids.repair_start(2, "drop")]
    # a finding that failed its check offers no button, only the command that measures it
    weak = findings.finding_card({**f, "significant": False}, ["neg", "pos"], {},
                                 can_repair=True)
    text = json.dumps(weak.to_plotly_json(), default=str)
    assert "no repair offered" in text and "--finding 2 --action relabel" in text
    assert not [c for c in weak.children[-1].children if hasattr(c, "id")]
    # a study's page (run=None) shows no repair and no command naming the run's directory
    study = json.dumps(findings.finding_card({**f, "significant": False}, ["neg", "pos"],
                                             {}, run=None).to_plotly_json(), default=str)
    assert "repair" not in study and "--finding" not in study
    # study mode's context has no job runner: no repair callback, no buttons
    assert ctx.jobs is None and not findings._can_repair(ctx)
    live = dataclasses.replace(ctx, jobs=JobRunner(tmp_path))
    # the control box is hidden until there are findings to repair
    assert findings.load_findings(live.data.run.path) is None
    tab = findings.layout(live, {})["side"]
    (shown,) = [x for x in tab.children.children[0].children
                if getattr(x, "id", None) == ids.REPAIR_CONTROL]
    assert shown.style == {"display": "none"}
    # a request for a repair the run's findings do not offer is refused in one line
    panel, stop, off = findings.repair_job(
        live, Trigger(ids.repair_start(7, "drop"), 1), [1], 0, 0)
    assert "no repair 'drop'" in panel[0].children and stop and off
    # the control box: ticked, the job runs `repair --control`; not ticked, without it
    started = []
    monkeypatch.setattr(findings, "_can_repair", lambda c: True)
    monkeypatch.setattr(findings, "load_findings", lambda run: {"findings": [
        {**f, "significant": False}]})
    assert findings._control_box(live).style == {"display": "none"}  # nothing to repair
    monkeypatch.setattr(findings, "load_findings", lambda run: {"findings": [f]})
    assert findings._control_box(live).style is None
    monkeypatch.setattr(live.jobs, "start", lambda kind, argv, info: started.append(
        (argv, info)))
    monkeypatch.setattr(live.jobs, "status", lambda: {"state": "idle"})
    for ticked in (["control"], [], ["seeds"]):
        findings.repair_job(live, Trigger(ids.repair_start(2, "drop"), 1), [1], 0, 0, ticked)
    (with_, info), (without, _), (seeded, seeded_info) = started
    assert "--control" in with_ and info["control"] and "--control" not in without
    assert "--seeds" not in with_ + without and "--control" not in seeded
    assert seeded[seeded.index("--seeds") + 1] == str(findings.REPAIR_SEEDS) == "3"
    assert seeded_info["seeds"] == 3
    assert with_[with_.index("--action") + 1] == "drop" and info["out"].endswith(
        "-repair-2-drop")
    monkeypatch.undo()
    live.jobs.start("repair", [sys.executable, "-c", "import time; time.sleep(30)"],
                    info={"finding": 1, "action": "drop", "out": str(tmp_path / "x")})
    panel, stop, off = findings.repair_job(live, Trigger(ids.REPAIR_POLL, 1), [], 0, 1)
    assert "repair of finding 1 by drop: starting" in panel[0].children
    assert not stop and not off
    panel, stop, off = findings.repair_job(live, Trigger(ids.REPAIR_CANCEL, 1), [], 1, 1)
    assert panel[0].children.endswith("cancelled") and stop and off


def test_the_sweep_runs_in_the_background_and_its_cancel_leaves_no_worker(explored_run,
                                                                          tmp_path):
    """The sweep tab's button starts `stateseer sweep` as a job: progress while it runs,
    cancel kills its process group (nothing written), and a finished sweep redraws the
    curve from the sweep.json it wrote."""
    import dataclasses
    import shutil
    import sys
    import time

    import psutil

    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.views import sweep
    from stateseer.app.workflows.jobs import JobRunner

    run = tmp_path / "run"
    shutil.copytree(explored_run, run)
    live = dataclasses.replace(ExplorerContext.load(run), jobs=JobRunner(tmp_path / "jobs"))
    status, stop, cancel_off, start_off, force_off, body = sweep.sweep_job(
        live, Trigger(ids.SWEEP_START, 1), 1, 0, 0, 0)
    job = live.jobs.job
    assert job.kind == "sweep" and "sweep" in job.argv and not stop and not cancel_off
    assert start_off and force_off and body is no_update
    pgid = os.getpgid(job.pid)
    status, stop, cancel_off, start_off, force_off, body = sweep.sweep_job(
        live, Trigger(ids.SWEEP_CANCEL, 1), 1, 0, 1, 0)
    assert "cancelled" in json.dumps(status, default=str) and stop and not start_off
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)  # the whole group is gone
    assert not psutil.pid_exists(job.pid) and not (run / "sweep" / "sweep.json").exists()
    # a short sweep to the end: the curve comes back with its points
    live.jobs.start("sweep", [sys.executable, "-m", "stateseer", "sweep", str(run),
                              "--states", "4,6", "--no-forcing", "--progress-json",
                              "{progress}"])
    deadline = time.time() + 180
    while live.jobs.status()["state"] == "running" and time.time() < deadline:
        time.sleep(0.5)
    status, stop, *_, body = sweep.sweep_job(live, Trigger(ids.SWEEP_POLL, 5), 0, 0, 0, 5)
    assert live.jobs.status()["state"] == "done" and stop
    graph = json.loads(json.dumps(body.to_plotly_json(), default=lambda o:
                                  o.to_plotly_json()))
    assert '"x": [4, 6]' in json.dumps(graph) and "stateseer sweep" in json.dumps(graph)


def test_forcing_per_state_runs_in_the_background_and_colours_the_diagram(explored_run,
                                                                          tmp_path):
    """The tab's second job: `stateseer force` in the background; when it is done the
    run's figures are read again, so the diagram can colour states by forcing."""
    import dataclasses
    import shutil
    import time

    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.views import diagram, sweep
    from stateseer.app.workflows.jobs import JobRunner

    run = tmp_path / "run"
    shutil.copytree(explored_run, run)
    live = dataclasses.replace(ExplorerContext.load(run), jobs=JobRunner(tmp_path / "jobs"))
    assert "no forcing figures yet" in diagram.color_note(live, "forcing")
    status, *_ = sweep.sweep_job(live, Trigger(ids.FORCE_START, 1), 0, 1, 0, 0)
    assert live.jobs.job.kind == "forcing" and "force" in live.jobs.job.argv
    assert "stateseer force" in json.dumps(status, default=lambda o: o.to_plotly_json())
    deadline = time.time() + 180
    while live.jobs.status()["state"] == "running" and time.time() < deadline:
        time.sleep(0.5)
    status, stop, *_ = sweep.sweep_job(live, Trigger(ids.SWEEP_POLL, 3), 0, 1, 0, 3)
    assert stop and "colour the diagram by forcing" in json.dumps(
        status, default=lambda o: o.to_plotly_json())
    assert live.data.forcing_per_state()  # read again from the metrics the job wrote
    assert "node colour = forcing agreement" in diagram.color_note(live, "forcing")


def test_the_automaton_is_drawn_left_to_right_one_arrow_per_pair_of_states():
    from stateseer.abstraction.automata.dfa import ExtractedDFA
    from stateseer.app.explorer.views import automaton

    # Tomita 7 (0*1*0*1*): a chain of four accepting states and a rejecting sink
    trans = np.array([[0, 1], [2, 1], [2, 3], [4, 3], [4, 4]])
    dfa = ExtractedDFA(("0", "1"), ["reject", "accept"], trans, np.array([1, 1, 1, 1, 0]),
                       report={"agreement": 1.0, "minimal_size_match": True,
                               "grammar_agreement_le12": 1.0})
    where = automaton.positions(dfa)
    assert [x for x, _ in where] == sorted(x for x, _ in where)  # left to right
    assert len({y for _, y in where}) == 1  # a chain stays on one line
    el = automaton.automaton_elements(dfa)
    nodes = [e for e in el if "source" not in e["data"]]
    edges = {(e["data"]["source"], e["data"]["target"]): e for e in el if "source" in e["data"]}
    assert [n["data"]["label"] for n in nodes] == ["0: accept", "1: accept", "2: accept",
                                                   "3: accept", "4: reject"]
    assert nodes[0]["classes"] == "initial" and nodes[4]["data"]["color"] != \
        nodes[0]["data"]["color"]
    assert edges[("q4", "q4")]["data"]["label"] == "0, 1"  # the sink's two symbols, one arrow
    assert edges[("q4", "q4")]["classes"] == "loop" and len(edges) == 9
    assert "the grammar's minimal DFA exactly" in automaton._headline(dfa)
    assert "refined from the recorded hidden states" in automaton._headline(dfa)
    dfa.report.update(method="active", algorithm="kv", membership_queries=1234, rounds=4,
                      seconds=0.5, heldout_error=0.0, majority_error=0.3)
    line = automaton._headline(dfa)
    assert "learnt by asking the model (KV: 1,234 queries, 4 hypotheses" in line
    assert "held-out error 0.00% (always the majority class: 30.00%)" in line


def test_the_automaton_tab_extracts_in_the_background_and_its_cancel_leaves_nothing(
        explored_tomita, explored_run, tmp_path):
    """Only runs over characters (or holding a DFA) get the tab; its button runs
    `stateseer extract-dfa` as a job, cancel kills the group and writes nothing, and a
    finished job redraws the tab with the automaton it wrote."""
    import dataclasses
    import shutil
    import time

    import psutil

    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.views import automaton
    from stateseer.app.workflows.jobs import JobRunner

    assert automaton.layout(ExplorerContext.load(explored_run), {}) == {}  # text: no tab
    run = tmp_path / "run"
    shutil.copytree(explored_tomita, run)
    plain = ExplorerContext.load(run)
    tab = json.dumps(automaton.layout(plain, {})["side"][0].to_plotly_json(), default=str)
    assert "No automaton yet" in tab and ids.DFA_START not in tab  # no jobs: no button
    live = dataclasses.replace(plain, jobs=JobRunner(tmp_path / "jobs"))
    status, stop, cancel_off, start_off, body = automaton.dfa_job(
        live, Trigger(ids.DFA_START, 1), 1, 0, 0)
    job = live.jobs.job
    assert job.kind == "dfa" and "extract-dfa" in job.argv and not stop and not cancel_off
    assert start_off and body is no_update
    pgid = os.getpgid(job.pid)
    status, stop, cancel_off, start_off, body = automaton.dfa_job(
        live, Trigger(ids.DFA_CANCEL, 1), 1, 1, 0)
    assert "cancelled" in json.dumps(status, default=str) and stop and not start_off
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
    assert not psutil.pid_exists(job.pid)
    assert not (run / "abstraction" / "dfa.json").exists()
    automaton.dfa_job(live, Trigger(ids.DFA_START, 2), 2, 1, 0)
    deadline = time.time() + 180
    while live.jobs.status()["state"] == "running" and time.time() < deadline:
        time.sleep(0.5)
    status, stop, *_, body = automaton.dfa_job(live, Trigger(ids.DFA_POLL, 3), 2, 1, 3)
    assert live.jobs.status()["state"] == "done" and stop
    drawn = json.dumps(body.to_plotly_json(), default=lambda o: o.to_plotly_json())
    assert "the grammar's minimal DFA exactly" in drawn and '"5: ' not in drawn
    assert '"4: ' in drawn  # Tomita 3's minimal DFA has five states, 0 to 4
    # a damaged file is named, not a crash
    (run / "abstraction" / "dfa.json").write_text("{")
    assert "cannot be read" in json.dumps(automaton.automaton_panel(run).to_plotly_json(),
                                          default=str)


def test_a_finished_repair_shows_its_control_beside_the_change(ctx, tmp_path):
    """`repair --control`'s model is shown as what retraining alone moved; a repair
    without one shows no such line."""
    from stateseer.app.explorer.views import findings

    doc = {"action": "drop", "finding": 1, "before": {"test_accuracy": 0.7},
           "after": {"test_accuracy": 0.75}, "delta": 0.05, "delta_ci": [0.02, 0.08],
           "per_class_delta": {"neg": -0.02, "pos": 0.12}, "classes_hurt": ["neg"],
           "finding_gone": True, "fixed": [], "broken": []}
    (tmp_path / "repair.json").write_text(json.dumps(doc))
    plain = json.dumps([c.to_plotly_json() for c in findings.repair_result(
        ctx, {"out": str(tmp_path)})], default=str)
    assert "0.700 \\u2192 0.750" in plain and "retraining alone" not in plain
    doc["control"] = {"left_out": 86, "test_accuracy": 0.71, "delta": 0.01,
                      "per_class_delta": {"neg": -0.031, "pos": 0.02}}
    (tmp_path / "repair.json").write_text(json.dumps(doc))
    shown = json.dumps([c.to_plotly_json() for c in findings.repair_result(
        ctx, {"out": str(tmp_path)})], default=str)
    assert "retraining alone (a control: 86 random training inputs left out, no edit): " \
           "test accuracy +0.010, single classes by up to 3.1%" in shown
    assert "Over 3 seeds" not in shown
    # `repair --seeds 3`: the mean change over the seeds, and whether a class loses on
    # average (neg lost 2 points in the one training, 0.4 on average: not hurt)
    doc["seeds"] = {"seeds": [0, 1000, 2000], "before": [0.7, 0.68, 0.72],
                    "after": [0.75, 0.74, 0.73], "delta_mean": 0.04,
                    "delta_ci": [-0.01, 0.09], "per_class_delta_mean": {"neg": -0.004,
                                                                        "pos": 0.08},
                    "classes_hurt": []}
    (tmp_path / "repair.json").write_text(json.dumps(doc))
    shown = json.dumps([c.to_plotly_json() for c in findings.repair_result(
        ctx, {"out": str(tmp_path)})], default=str)
    assert "Over 3 seeds" in shown and "0.700 \\u2192 0.740 on average" in shown
    assert "95 % CI -0.010 to +0.090" in shown and "neg -0.4%" in shown
    assert "no class loses more than a point on average" in shown


def test_training_inputs_of_a_finding_and_of_a_repair_open_their_traces(ctx, tmp_path):
    """Is the training data the cause? A finding's training inputs that carry its culprit,
    and the training inputs a finished repair changed (NEW/repair_edits.json), are buttons
    that select the input in the training split."""
    from stateseer.app.explorer.views import findings
    from stateseer.app.selection import EMPTY

    assert "train" in ctx.data.splits
    train_rows = findings._rows_of(ctx, "train")
    iids = sorted(train_rows)[:3]
    f = {"rank": 2, "kind": "shortcut", "tokens": ["w"], "description": "d", "q_value": 1e-5,
         "error_rate_with": 0.9, "error_rate_without": 0.2, "significant": True,
         "intervention": None, "actions": ["drop"], "examples": [],
         "training": {"n_inputs": 3, "labels": [3, 0], "examples": [*iids, -1]}}
    card = findings.finding_card(f, ["neg", "pos"], {}, train_rows=train_rows)
    shown = [c for c in card.children if getattr(c, "className", "") == "examples training"]
    buttons = shown[0].children[1:]
    assert [b.id for b in buttons] == [ids.finding_example("train-2", train_rows[i])
                                       for i in iids]  # -1 is no training input: left out
    assert [b.children for b in buttons] == [f"#{i}" for i in iids]
    # a click selects the input in the training split, whatever split the findings are on
    new, query, culprit = findings.open_example(ctx, Trigger(buttons[1].id, 1), [1], EMPTY)
    assert new["split"] == "train" and new["row"] == train_rows[iids[1]] and query
    # ... and says which input the trace marks the culprit on (this finding is not in the
    # run's findings.json: no tokens to mark)
    assert culprit == {"split": "train", "index": train_rows[iids[1]], "tokens": []}
    # a finished repair names the training inputs it changed, the first as buttons
    doc = {"action": "relabel", "finding": 1, "before": {"test_accuracy": 0.7},
           "after": {"test_accuracy": 0.75}, "delta": 0.05, "delta_ci": [0.02, 0.08],
           "per_class_delta": {"neg": 0.0}, "finding_gone": True, "fixed": [], "broken": []}
    (tmp_path / "repair.json").write_text(json.dumps(doc))
    (tmp_path / "repair_edits.json").write_text(json.dumps(
        {"action": "relabel", "relabelled_rows": sorted(train_rows)[:12], "to": "neg"}))
    panel = findings.repair_result(ctx, {"out": str(tmp_path)})[0]
    edits = next(c for c in panel.children if getattr(c, "className", "") == "examples edits")
    assert edits.children[0].children == "12 training inputs relabelled to neg"
    assert len(edits.children[2:]) == 8 and edits.children[2].id == ids.finding_example(
        "train-edit", train_rows[iids[0]])
    # a setting changed instead of the data: said so, no buttons
    (tmp_path / "repair_edits.json").write_text(json.dumps(
        {"action": "reconfigure", "settings": {"truncate": [20, None]}}))
    panel = findings.repair_result(ctx, {"out": str(tmp_path)})[0]
    assert any("no training input changed; the setting truncate 20 → None" in str(c.children)
               for c in panel.children if hasattr(c, "children"))


def test_an_opened_example_marks_its_findings_culprit_in_the_trace(ctx):
    """The culprit is marked (a yellow bar) on the input its finding's example opened, and on
    no other input the trace shows later."""
    from stateseer.app.explorer.views import trace
    from stateseer.app.explorer.views.core import active_store

    tr = ctx.data.trace_instance("test", 0)
    word = tr.tokens[0]
    store = {"split": "test", "index": tr.index, "tokens": [word]}
    _, strips = trace.show_trace(ctx, active_store(tr), {}, store)
    marked = [t for t, c in enumerate(strips[0].children[1:])
              if "culprit" in c.children[0].className]
    assert marked == [t for t, tok in enumerate(tr.tokens) if tok == word]
    assert "the finding's culprit" in strips[-1].children
    other = ctx.data.trace_instance("test", 1)
    _, strips = trace.show_trace(ctx, active_store(other), {}, store)
    assert not [c for c in strips[0].children[1:] if "culprit" in c.children[0].className]
