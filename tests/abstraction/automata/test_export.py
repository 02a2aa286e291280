"""DOT export (AALpy conventions) and its reader, Graphviz rendering, traces CSV, writers."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import shutil

import numpy as np
import pytest

from stateseer.abstraction.automata.export import (
    fsm_to_dot,
    read_dot,
    render,
    write_export,
    write_traces_csv,
)
from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.errors import AbstractionError
from tests.abstraction.automata.test_fsm import example_a, triples
from tests.conftest import REQUIRE_BROWSER, one_line


def awkward_fsm() -> FSM:
    """Tokens that stress DOT quoting: quotes, backslashes, commas, brackets, unicode."""
    alphabet = ['"', "\\", "a,b", "]", "café", "x=1", "new\nline"]
    rng = np.random.default_rng(0)
    n_steps = 60
    offsets = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n_steps), 9,
                                                      replace=False)), [n_steps]])
    states = rng.integers(0, 3, n_steps)
    tokens = rng.integers(0, len(alphabet), n_steps)
    p = np.where(states == 2, 0.8, 0.2) + rng.uniform(-0.1, 0.1, n_steps)
    return FSM.from_paths(states, offsets, tokens, np.stack([1 - p, p], 1), np.array([0.3, 0.7]),
                          n_states=3, classes=["rotten", "fresh"], alphabet=alphabet,
                          coords=rng.normal(size=(4, 2)), fallback="nearest")


def test_dot_has_aalpy_start_marker():
    dot = fsm_to_dot(example_a())
    lines = [ln.strip() for ln in dot.splitlines()]
    assert lines[0].startswith("digraph ")
    start = next(ln for ln in lines if ln.startswith("__start0 ["))
    assert 'label=""' in start and "shape=none" in start
    assert "__start0 -> s0;" in lines
    assert sum(ln.startswith("__start0 ->") for ln in lines) == 1
    assert dot.rstrip().endswith("}")


def test_dot_edges_are_per_state_pair_and_prunable():
    fsm = example_a()
    dot = fsm_to_dot(fsm)
    edges = [ln for ln in dot.splitlines() if " -> s" in ln and "__start0" not in ln]
    assert len(edges) == 5  # five state pairs
    assert any(ln.strip().startswith("s0 -> s2") and "count=2" in ln for ln in edges)
    pruned = fsm_to_dot(fsm, top_k=1, self_loops=False)
    kept = sorted(ln.split("[")[0].strip() for ln in pruned.splitlines()
                  if " -> s" in ln and "__start0" not in ln)
    assert kept == ["s0 -> s1", "s1 -> s2"]


@pytest.mark.parametrize("make", [lambda: example_a("nearest"),
                                  lambda: example_a("displacement"), awkward_fsm])
def test_read_dot_round_trips(make):
    fsm = make()
    assert set(fsm.labels.tolist()) == {0, 1}
    back = read_dot(fsm_to_dot(fsm))
    assert sorted(triples(back)) == sorted(triples(fsm))
    assert back.classes == fsm.classes and back.initial == fsm.initial
    np.testing.assert_array_equal(back.visits, fsm.visits)
    np.testing.assert_array_equal(back.labels, fsm.labels)
    np.testing.assert_allclose(back.prediction, fsm.prediction, atol=1e-6)
    np.testing.assert_allclose(back.coords, fsm.coords, atol=1e-6)
    back = dataclasses.replace(back, fallback=fsm.fallback)  # not part of DOT (see below)
    # Same transition function on every (state, token) pair, alphabet order aside; tokens
    # without transitions are not in the DOT, and stay in both machines.
    for t in fsm.alphabet:
        want = fsm.delta[:, fsm.token_index[t]]
        got = back.delta[:, back.token_index[t]] if t in back.token_index else np.arange(
            back.n_states)
        np.testing.assert_array_equal(got, want, err_msg=repr(t))


@pytest.mark.parametrize("fallback", ["stay", "token"])
def test_read_dot_keeps_the_fallback(fallback):
    fsm = example_a(fallback)
    back = read_dot(fsm_to_dot(fsm))
    assert back.fallback == fallback


def test_read_dot_keeps_classes_no_state_predicts():
    fsm = example_a("nearest")
    fsm.prediction = np.array([[0.2, 0.8], [0.3, 0.7], [0.1, 0.9]])  # every state: pos
    back = read_dot(fsm_to_dot(fsm))
    assert back.classes == ["neg", "pos"]


def test_read_dot_with_given_classes_and_without_coordinates():
    fsm = example_a(coords=None)
    back = read_dot(fsm_to_dot(fsm), classes=["n", "p"])
    assert back.classes == ["n", "p"] and back.coords is None and back.fallback == "stay"
    np.testing.assert_array_equal(back.delta, fsm.delta)


@pytest.mark.parametrize(("text", "match"), [
    ("digraph g { a -> b; }", "no states found"),
    ('digraph g {\n  s0 [label="0", visits="1", prediction="[1, 0]"];\n'
     '  s0 -> s0 [label="a"];\n}', "without a 'tokens' attribute"),
    ('digraph g {\n  s0 [label="0", visits="1"];\n}', "incomplete"),
])
def test_read_dot_refuses_foreign_dot(text, match):
    with pytest.raises(AbstractionError, match=match) as e:
        read_dot(text)
    one_line(e.value)


def _need_dot():
    if shutil.which("dot") is None:
        if REQUIRE_BROWSER:
            pytest.fail("the Graphviz `dot` binary is required (STATESEER_REQUIRE_BROWSER=1)")
        pytest.skip("the Graphviz `dot` binary is not installed")


@pytest.mark.exe
def test_render_svg_with_graphviz():
    _need_dot()
    fsm = awkward_fsm()
    svg = render(fsm_to_dot(fsm), "svg").decode()
    assert "<svg" in svg and svg.rstrip().endswith("</svg>")
    assert svg.count('class="node"') == fsm.n_states + 1  # the invisible start node too
    assert "café" in svg


@pytest.mark.exe
def test_render_reports_graphviz_syntax_errors():
    _need_dot()
    with pytest.raises(AbstractionError, match="Graphviz failed") as e:
        render("digraph { a -> ; }", "svg")
    one_line(e.value)


def test_render_without_dot_binary(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no `dot` anywhere
    with pytest.raises(AbstractionError, match="Graphviz `dot` program is not installed") as e:
        render(fsm_to_dot(example_a()), "svg")
    one_line(e.value)


def test_traces_csv_columns_and_json_lists():
    rows = [
        {"id": 7, "split": "test", "label": "fresh", "prediction": "rotten",
         "tokens": ["not", "bad", ",", "\"really\""], "states": [0, 1, 1, 2, 2],
         "simulated_states": [0, 1, 2, 2, 2], "extra": "ignored"},
        {"id": 8, "split": "test", "label": "rotten", "prediction": "rotten", "tokens": [],
         "states": [0], "simulated_states": [0]},
    ]
    buf = io.StringIO()
    write_traces_csv(buf, rows)
    buf.seek(0)
    reader = csv.DictReader(buf)
    assert reader.fieldnames == ["id", "split", "label", "prediction", "tokens", "states",
                                 "simulated_states"]
    got = list(reader)
    assert len(got) == 2
    assert json.loads(got[0]["tokens"]) == rows[0]["tokens"]
    assert json.loads(got[0]["states"]) == [0, 1, 1, 2, 2]
    assert json.loads(got[1]["simulated_states"]) == [0]
    assert got[0]["id"] == "7" and got[0]["prediction"] == "rotten"


def test_write_export_refuses_to_overwrite(tmp_path):
    out = tmp_path / "deep" / "fsm.dot"
    write_export("one", out)
    with pytest.raises(AbstractionError, match="--force") as e:
        write_export("two", out)
    one_line(e.value)
    assert out.read_text() == "one"
    write_export(b"three", out, overwrite=True)
    assert out.read_bytes() == b"three"
    buf = io.StringIO()
    write_export("four", buf)
    assert buf.getvalue() == "four"
    assert sorted(p.name for p in out.parent.iterdir()) == ["fsm.dot"]


@pytest.mark.parametrize("fmt", ["json", "dot", "graphml", "node-link"])
def test_writers_take_a_path_or_an_open_file(tmp_path, fmt):
    from stateseer.abstraction.automata.export import export_data, write_automaton

    fsm = example_a()
    data = export_data(fsm, fmt)
    path = tmp_path / f"fsm.{fmt}"
    write_automaton(fsm, fmt, path)
    assert (path.read_bytes() if isinstance(data, bytes) else path.read_text()) == data
    with pytest.raises(AbstractionError, match="exists"):
        write_automaton(fsm, fmt, path)  # never silently replaced
    buf = io.BytesIO() if isinstance(data, bytes) else io.StringIO()
    write_automaton(fsm, fmt, buf)
    assert buf.getvalue() == data
    rows = [{"id": 0, "split": "test", "label": "a", "prediction": "a", "tokens": ["x"],
             "states": [0, 1], "simulated_states": [0, 1]}]
    write_traces_csv(tmp_path / "t.csv", rows)
    text = io.StringIO()
    write_traces_csv(text, rows)
    assert (tmp_path / "t.csv").read_bytes().decode() == text.getvalue()  # CSV: \r\n kept


def test_extracted_dfa_exports_through_the_same_writers():
    from stateseer.abstraction.automata.dfa import ExtractedDFA
    from stateseer.abstraction.automata.export import export_data

    parity = ExtractedDFA(alphabet=("a", "b"), classes=["reject", "accept"],
                          transitions=np.array([[1, 0], [0, 1]]), state_class=np.array([1, 0]))
    assert export_data(parity, "dot") == parity.to_dot()
    assert json.loads(export_data(parity, "json"))["kind"] == "dfa"
    with pytest.raises(AbstractionError, match="unknown automaton format"):
        export_data(parity, "traces-csv")


def numeric_token_fsm() -> FSM:
    """Tokens that networkx's default ``edge_key_type=int`` would collapse: 0, 00, 005."""
    alphabet = ["0", "00", "005", "5", "05", "a"]
    rng = np.random.default_rng(1)
    n_steps = 400
    offsets = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n_steps), 39,
                                                      replace=False)), [n_steps]])
    states = rng.integers(0, 4, n_steps)
    tokens = rng.integers(0, len(alphabet), n_steps)
    p = np.where(states >= 2, 0.8, 0.2)
    return FSM.from_paths(states, offsets, tokens, np.stack([1 - p, p], 1), np.array([0.5, 0.5]),
                          n_states=4, classes=["neg", "pos"], alphabet=alphabet)


def test_graphml_reads_back_every_transition_with_networkx_defaults(tmp_path):
    import networkx as nx

    from stateseer.abstraction.automata.export import write_automaton

    fsm = numeric_token_fsm()
    path = tmp_path / "fsm.graphml"
    write_automaton(fsm, "graphml", path)
    back = nx.read_graphml(path)  # default arguments, as a user would call it
    assert back.number_of_nodes() == fsm.n_states
    assert back.number_of_edges() == len(fsm.source)
    got = sorted((int(u), d["token"], int(v), d["count"]) for u, v, d in back.edges(data=True))
    assert got == sorted(triples(fsm))


def test_read_dot_takes_a_path_a_file_or_the_text(tmp_path):
    fsm = example_a("nearest")
    dot = fsm_to_dot(fsm)
    path = tmp_path / "fsm.dot"
    path.write_text(dot, encoding="utf-8")
    want = triples(fsm)
    assert triples(read_dot(path)) == want
    assert triples(read_dot(str(path))) == want
    with path.open(encoding="utf-8") as fh:
        assert triples(read_dot(fh)) == want
    with path.open("rb") as fh:
        assert triples(read_dot(fh)) == want
    assert triples(read_dot(dot)) == want
    with pytest.raises(AbstractionError, match="cannot read") as e:
        read_dot(tmp_path / "missing.dot")
    one_line(e.value)


def test_dot_export_colours_twenty_classes_apart_and_as_the_explorer_does():
    """Class colours reach the exports (DOT/SVG/PNG/PDF): distinct at 20 classes, and the
    same colours the explorer draws."""
    from stateseer.abstraction.colors import CATEGORICAL, mix_color
    from stateseer.app.explorer.palette import mix_color as browser_mix

    n = 20
    pred = np.eye(n) * 0.9 + 0.1 / n
    fsm = FSM.from_paths(np.arange(n), np.array([0, n]), np.zeros(n, np.int64), pred,
                         np.full(n, 1 / n), n_states=n, classes=[f"c{k}" for k in range(n)],
                         alphabet=["x"])
    dot = fsm_to_dot(fsm)
    fills = {mix_color(fsm.prediction[s]) for s in range(fsm.n_states)}
    assert len(fills) >= n and all(f'fillcolor="{f}"' in dot for f in fills)
    assert len(set(CATEGORICAL)) == n
    assert all(mix_color(p) == browser_mix(p) for p in pred)


def test_node_link_is_read_by_the_installed_networkx_with_its_defaults():
    import networkx as nx

    from stateseer.abstraction.automata.export import export_data

    fsm = example_a()
    g = nx.node_link_graph(json.loads(export_data(fsm, "node-link")))  # no options
    want = fsm.to_networkx()
    assert sorted(g.nodes) == sorted(want.nodes)
    assert g.number_of_edges() == want.number_of_edges() > 0


def test_drawings_prune_by_default_and_top_k_0_draws_every_edge():
    from stateseer.abstraction.automata.export import RENDERED_TOP_K, drawn_top_k, export_data
    from stateseer.abstraction.automata.fsm import FSM

    rng = np.random.default_rng(0)
    n, n_inputs, length = 8, 200, 20
    states = rng.integers(0, n, n_inputs * length)
    offsets = np.arange(0, n_inputs * length + 1, length)
    proba = rng.dirichlet([1, 1], n_inputs * length)
    fsm = FSM.from_paths(states, offsets, rng.integers(0, 30, n_inputs * length), proba,
                         np.array([0.5, 0.5]), n_states=n, classes=["a", "b"],
                         alphabet=[f"w{i}" for i in range(30)])
    assert drawn_top_k(None) == RENDERED_TOP_K and drawn_top_k(0) is None
    pruned, full = export_data(fsm, "dot"), export_data(fsm, "dot", top_k=0)
    # every state reaches all 8 others: 4 of 8 edges per state are drawn by default
    assert 0 < pruned.count("->") < full.count("->") * 0.6
    def edges(f):
        return sorted((t["source"], t["target"], t["token"], t["count"])
                      for t in f.to_dict()["transitions"])
    assert edges(read_dot(full)) == edges(fsm)  # every edge: lossless
    assert edges(read_dot(pruned)) != edges(fsm)
