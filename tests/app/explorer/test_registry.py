"""The view registry: the page, the callbacks and study mode all read one list."""

from __future__ import annotations

import json

import pytest
from dash import Input, Output, html

from stateseer.app.explorer.registry import REGISTRY
from stateseer.app.explorer.view import Callback, View


def _ids(node) -> set:
    """Every component id in a layout (as JSON)."""
    out = set()
    if isinstance(node, dict):
        props = node.get("props", {})
        if isinstance(props.get("id"), str):
            out.add(props["id"])
        for v in props.values():
            out |= _ids(v)
    elif isinstance(node, list):
        for v in node:
            out |= _ids(v)
    return out


def _json(layout):
    return json.loads(json.dumps(layout, default=lambda o: o.to_plotly_json()))


# -- a new view, added in the test itself: one module's worth of code, one registry call --
def _hello_layout(ctx, initial):
    return {"below": html.Div([html.Button("hello", id="hello-btn", n_clicks=0),
                               html.Span(id="hello-out")], id="hello-panel",
                              className="panel")}


def greet(ctx, n_clicks):
    return f"{ctx.data.name}: {n_clicks} click(s)"


HELLO = View(name="hello", layout=_hello_layout, ids=("hello-panel",), callbacks=(
    Callback(greet, [Output("hello-out", "children")], [Input("hello-btn", "n_clicks")],
             prevent_initial_call=True),))


def test_a_view_added_with_one_registry_call_is_laid_out_and_answers(ctx):
    from stateseer.app.main import create_app

    registry = REGISTRY.add(HELLO)
    app = create_app(context=ctx, registry=registry)
    assert "hello-out.children" in app.callback_map
    layout = app.layout()  # the page as served (outside a request: the default selection)
    ids = _ids(_json(layout))
    assert {"hello-panel", "hello-btn", "hello-out", "diagram", "table"} <= ids
    third_row = layout.children[-1]
    assert third_row.children[-1].id == "hello-panel"  # the registry's order is page order
    # the callback runs as Dash runs it
    client = app.server.test_client()
    r = client.post("/_dash-update-component", json={
        "output": "hello-out.children", "outputs": {"id": "hello-out", "property": "children"},
        "inputs": [{"id": "hello-btn", "property": "n_clicks", "value": 2}],
        "changedPropIds": ["hello-btn.n_clicks"]})
    assert r.status_code == 200
    assert json.loads(r.data)["response"]["hello-out"]["children"] == "explored: 2 click(s)"
    # study mode knows it
    assert "hello" in registry.names() and "hello" not in REGISTRY.names()
    assert registry.targets()["hello"] == (("id", "hello-panel"),)
    assert registry.component_ids("hello") == {"hello-panel", "hello-out", "hello-btn"}


def test_the_registry_names_exactly_the_study_views():
    from stateseer.app.study.spec import VIEWS

    assert sorted(REGISTRY.names()) == sorted(VIEWS)


def test_every_declared_target_is_on_the_page_and_nothing_else(ctx):
    ids = _ids(_json(REGISTRY.layout(ctx)))
    for view, targets in REGISTRY.targets().items():
        for kind, name in targets:
            if kind == "id":
                assert name in ids, (view, name)
    # a view that places a component it does not declare is refused when the page is built
    bad = View(name="bad", layout=lambda ctx, initial: {"below": html.Div(id="stray")})
    with pytest.raises(ValueError, match="stray"):
        REGISTRY.add(bad).layout(ctx)
    with pytest.raises(ValueError, match="twice"):
        REGISTRY.add(View(name="table", layout=lambda ctx, initial: {}))


def test_component_ids_say_which_view_owns_what():
    assert {"diagram", "topk", "hover-state", "dl-svg"} <= REGISTRY.component_ids("diagram")
    assert "token" in REGISTRY.component_ids("trace_text")  # pattern-matching: its type
    assert {"nn-list", "nn-row"} <= REGISTRY.component_ids("nearest")
    assert {"trace-btn", "new-text"} <= REGISTRY.component_ids("input")
    for view in REGISTRY.names():  # the stores every view shares belong to none
        assert not {"selection", "active-trace", "url"} & REGISTRY.component_ids(view), view


def test_views_left_out_are_not_in_the_page_at_all(ctx):
    page = _json(REGISTRY.layout(ctx, views=["table", "trace_text"]))
    ids = _ids(page)
    assert {"table", "trace-title", "trace-tokens", "selection", "active-trace"} <= ids
    assert not {"diagram", "diagram-panel", "new-text", "dl-figure", "nn-list"} & ids
    # an output of a left-out view that a callback on the page also updates (here: the
    # chart, drawn with the trace) is an empty hidden placeholder: Dash refuses a
    # callback whose outputs are only partly in the page
    holders = {c["props"]["id"]: c for c in page["props"]["children"]
               if c["props"].get("id") in ("trace-chart", "input-message", "forced")}
    assert set(holders) == {"trace-chart", "input-message", "forced"}
    assert all(not c["props"].get("children") for c in holders.values())
    assert "diagram" in _ids(_json(REGISTRY.layout(ctx)))  # default: every view
    # pattern-matching ids (the pattern buttons) on the page are no trouble
    assert "influential" in _ids(_json(REGISTRY.layout(ctx, views=["patterns", "table"])))
    with pytest.raises(ValueError, match="unknown views"):
        REGISTRY.layout(ctx, views=["nope"])


def test_what_another_optional_view_places_is_read_as_optional(ctx):
    from stateseer.app.main import create_app

    app = create_app(context=ctx)
    spec = next(c for c in app._callback_list if c["output"].startswith("..active-trace"))
    optional = {s["id"] for s in spec["state"] + spec["inputs"] if s.get("allow_optional")}
    assert {"new-text", "compare-mode", "pinned"} <= optional
    assert "selection" not in optional  # the core's own store is always there


def test_a_fuse_group_is_one_callback_that_runs_only_the_members_that_fired(ctx):
    from stateseer.app.explorer import ids
    from stateseer.app.explorer.views import core
    from stateseer.app.main import create_app

    app = create_app(context=ctx)
    key = next(k for k in app.callback_map if "trace-title.children" in k)
    assert "trace-chart.figure" in key and "forced.data" in key
    active = core.active_store(ctx.data.trace_instance("test", 1))
    outputs = [{"id": o.split(".")[0], "property": o.split(".")[1]}
               for o in key.strip(".").split("...")]
    inputs = [{"id": d["id"], "property": d["property"],
               "value": active if d["id"] == ids.ACTIVE_TRACE else None}
              for d in app.callback_map[key]["inputs"]]
    state = [{"id": d["id"], "property": d["property"], "value": None}
             for d in app.callback_map[key]["state"]]
    client = app.server.test_client()

    def post(changed):
        r = client.post("/_dash-update-component", json={
            "output": key, "outputs": outputs, "inputs": inputs, "state": state,
            "changedPropIds": [changed]})
        return json.loads(r.data)["response"] if r.status_code == 200 else {}

    everything = post("active-trace.data")  # a new trace: title, strip and chart at once
    assert {"trace-title", "trace-tokens", "trace-chart", "force-note"} <= set(everything)
    only_chart = post("forced.data")  # a forced run: the chart only
    assert set(only_chart) == {"trace-chart"}
