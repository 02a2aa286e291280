"""The explorer's run data and pure functions: instance queries, selection, trace records,
views — no browser."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stateseer.app.explorer.context import ExplorerContext
from stateseer.app.explorer.views.chart import probability_figure
from stateseer.app.explorer.views.diagram import diagram_elements
from stateseer.app.explorer.views.trace import flips, token_strip
from stateseer.app.selection import EMPTY, apply_event, from_query, to_query
from stateseer.app.workflows.query import InstanceQuery, query_instances
from stateseer.app.workflows.records import TraceRecord
from stateseer.core.errors import StateseerError
from tests.conftest import one_line


@pytest.fixture(scope="module")
def ctx(explored_run):
    return ExplorerContext.load(explored_run)


@pytest.fixture(scope="module")
def data(ctx):
    return ctx.data


def test_state_filter_returns_exactly_the_inputs_through_the_state(data):
    tr = data.traces["test"]
    states = data.abstraction.states["test"]
    s = int(np.bincount(states).argmax())
    rows, total, msg = query_instances(data, InstanceQuery(split="test", state=s,
                                                           page_size=10**6))
    expected = sorted({int(tr.step_input[j]) for j in np.flatnonzero(states == s)})
    assert msg == "" and total == len(expected)
    assert sorted(r["index"] for r in rows) == expected


def test_the_first_page_builds_none_of_the_filters_parts(data):
    from stateseer.app.workflows.query import SplitIndex

    tr = data.traces["val"]
    idx = SplitIndex(tr, data.abstraction.states["val"], data.fsm.n_states)

    class One:  # a run view holding only this fresh index
        classes = data.classes

        def index(self, split):
            return idx

    rows, total, _ = query_instances(One(), InstanceQuery(split="val", page_size=5))
    assert total == tr.n_inputs and len(rows) == 5
    assert not {"_by_state", "_collapsed", "lower"} & set(vars(idx))  # built on first use
    s = int(data.abstraction.states["val"][0])
    _, through, _ = query_instances(One(), InstanceQuery(split="val", state=s))
    assert "_by_state" in vars(idx) and "_collapsed" not in vars(idx) and 0 < through


def test_pattern_filter_matches_collapsed_paths(data):
    tr = data.traces["test"]
    pattern = None
    for i in range(tr.n_inputs):  # first input with two distinct consecutive states
        path = [0, *data.abstraction.states["test"][tr.steps(i)].tolist()]
        collapsed = [p for j, p in enumerate(path) if j == 0 or p != path[j - 1]]
        if len(collapsed) >= 3:
            pattern = tuple(collapsed[1:3])
            break
    rows, _total, _ = query_instances(data, InstanceQuery(split="test", pattern=pattern,
                                                         page_size=10**6))
    assert i in {r["index"] for r in rows}
    for r in rows:
        path = [0, *data.abstraction.states["test"][tr.steps(r["index"])].tolist()]
        collapsed = [p for j, p in enumerate(path) if j == 0 or p != path[j - 1]]
        assert any(tuple(collapsed[k:k + 2]) == pattern for k in range(len(collapsed) - 1))


def test_search_sort_page_and_bad_regex(data):
    tr = data.traces["test"]
    word = "film"
    rows, total, _ = query_instances(data, InstanceQuery(split="test", search=word,
                                                         page_size=10**6))
    assert total == sum(word in t.lower() for t in tr.texts) and total > 0
    rows, total_rx, _ = query_instances(data, InstanceQuery(split="test", search=r"\bfilm\b",
                                                            regex=True, page_size=10**6))
    assert 0 < total_rx <= total
    rows, total_bad, msg = query_instances(data, InstanceQuery(split="test", search="(film",
                                                               regex=True))
    assert "invalid regular expression" in msg and total_bad == tr.n_inputs
    rows, _, _ = query_instances(data, InstanceQuery(split="test", sort_by="confidence",
                                                     descending=True, page_size=5))
    conf = [r["confidence"] for r in rows]
    assert conf == sorted(conf, reverse=True) and len(rows) == 5
    page2, _, _ = query_instances(data, InstanceQuery(split="test", page=1, page_size=5))
    page1, _, _ = query_instances(data, InstanceQuery(split="test", page=0, page_size=5))
    assert {r["index"] for r in page1}.isdisjoint({r["index"] for r in page2})
    wrong, n_wrong, _ = query_instances(data, InstanceQuery(split="test", correct="wrong",
                                                            page_size=10**6))
    assert n_wrong == int((tr.predictions != tr.labels).sum())
    assert all(r["correct"] == "✗" for r in wrong)


def test_selection_round_trips_through_the_url(data):
    n_inputs = {s: data.traces[s].n_inputs for s in data.splits}
    pats = data.abstraction.patterns
    sel = {"split": "test", "state": 3, "row": 5, "pattern": None}
    assert from_query(to_query(sel), data.splits, data.fsm.n_states, n_inputs, pats) == sel
    bad = from_query("?split=nope&state=999&row=-1&pattern=buggy:x", data.splits,
                     data.fsm.n_states, n_inputs, pats)
    assert bad == {"split": "test", "state": None, "row": None, "pattern": None}
    assert apply_event(sel, "state", 3)["state"] is None  # clicking again unselects
    assert apply_event(sel, "split", "train") == {**sel, "split": "train", "row": None}
    assert apply_event(sel, "clear") == {**EMPTY, "split": "test"}


def test_typed_text_is_traced_with_unknown_words_and_its_path(ctx, data):
    tr = ctx.models.trace_text("A zorblaxian film that works !")
    assert tr.tokens == ("a", "zorblaxian", "film", "that", "works", "!")
    assert tr.known[1] is False and tr.known[2] is True and not tr.recorded
    assert len(tr.states) == tr.n_tokens + 1 == len(tr.simulated)
    assert tr.states[0] == 0 and all(1 <= s < data.fsm.n_states for s in tr.states[1:])
    assert np.argmax(tr.final_proba) == tr.prediction
    with pytest.raises(StateseerError, match="shorten") as e:
        ctx.models.trace_text("x " * 20_001)
    one_line(e.value)


def test_recorded_instance_trace_matches_the_traces(data):
    tr = data.trace_instance("test", 4)
    sl = data.traces["test"].steps(4)
    assert list(tr.states[1:]) == data.abstraction.states["test"][sl].tolist()
    np.testing.assert_allclose(tr.proba, data.traces["test"].proba[sl], atol=1e-4)
    assert tr.recorded and tr.key == "test:4" and tr.label is not None
    with pytest.raises(StateseerError, match="does not exist"):
        data.trace_instance("test", 10**6)


def test_diagram_elements_prune_and_highlight(data):
    fsm = data.fsm
    els = diagram_elements(fsm, top_k=2, self_loops=False, positions=data.positions)
    nodes = [e for e in els if "source" not in e["data"]]
    edges = [e for e in els if "source" in e["data"]]
    assert len(nodes) == fsm.n_states
    per_source: dict[str, int] = {}
    for e in edges:
        assert e["data"]["source"] != e["data"]["target"]
        per_source[e["data"]["source"]] = per_source.get(e["data"]["source"], 0) + 1
    assert max(per_source.values()) <= 2
    path = list(data.trace_instance("test", 0).states)
    els = diagram_elements(fsm, top_k=1, path=path, positions=data.positions)
    on_path = {e["data"]["id"] for e in els if "path" in e["classes"].split()}
    for a, b in itertools.pairwise(path):
        assert f"s{a}" in on_path and f"s{b}" in on_path
        if a != b:
            assert f"e{a}-{b}" in on_path  # drawn even if pruned


def test_trace_views_mark_flips_and_escape_text():
    trace = TraceRecord(text="<b>good</b> bad", tokens=("<b>good</b>", "bad"),
                        known=(True, False), proba=((0.2, 0.8), (0.9, 0.1)),
                        initial_proba=(0.6, 0.4), states=(0, 3, 5), simulated=(0, 3, 4),
                        prediction=0, label=1)
    assert flips(trace) == [0, 1]
    strip = token_strip(trace, ["neg", "pos"])
    texts = [c.children[0].children for c in strip.children[1:]]
    assert texts == ["<b>good</b>", "bad"]  # plain text children: React escapes them
    assert "unknown" in strip.children[2].children[0].className
    fig = probability_figure(trace, ["neg", "pos"])
    stars = [t for t in fig["data"] if t.get("name") == "prediction flips"]  # a plain dict
    assert list(stars[0]["x"]) == [1, 2]


def test_a_catastrophic_regex_runs_in_linear_time_or_is_refused(data):
    """``^(?:\\w\\w|\\w|\\s)*!`` backtracks exponentially in Python's ``re``; the table's
    search runs it on RE2 (or as plain text without RE2) and says so in one line."""
    from stateseer.app.workflows.query import MAX_SEARCH_CHARS, compile_search

    tr = data.traces["test"]
    rows, total, msg = query_instances(data, InstanceQuery(
        split="test", search=r"^(?:\w\w|\w|\s)*!", regex=True, page_size=10**6))
    assert total <= tr.n_inputs and len(rows) == total
    match, note = compile_search(r"^(?:\w\w|\w|\s)*!")
    assert match is not None and match("ab " * 5000) is False
    try:
        import re2  # noqa: F401
    except ImportError:  # plain text: the expression's characters, literally
        assert "plain text" in note and "google-re2" in note
    else:
        assert note == "" and match("ab!") is True
    assert msg == note and "\n" not in msg
    _, _, msg = query_instances(data, InstanceQuery(split="test", search=r"(a)\1",
                                                    regex=True))
    assert "invalid regular expression" in msg or "plain text" in msg
    _, total_long, msg = query_instances(data, InstanceQuery(
        split="test", search="x" * (MAX_SEARCH_CHARS + 1), regex=True))
    assert "longer than" in msg and total_long == tr.n_inputs
