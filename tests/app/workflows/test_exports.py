"""``stateseer export``: what exporting costs (#53: the benchmark is benchmarks/exports.py),
the DFA's drawings, the bound on rendered drawings and the formats `--dfa` takes."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from stateseer.app.cli.main import main
from tests.conftest import REQUIRE_BROWSER, one_line

_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\]\s]+)')


def test_an_export_imports_no_clustering():
    """#53: an automaton export is a read and a write: importing its module (and the FSM)
    no longer pulls scikit-learn's clustering in through the package's first import."""
    import subprocess
    import sys

    probe = ("import sys, stateseer.abstraction.automata.export, "
             "stateseer.app.workflows.exports; "
             "print(sorted(m for m in ('sklearn.cluster', 'torch', 'dash') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", out


# -- the DFA's drawings, the rendered formats' bound, the formats --dfa takes --------------
N_STATES, N_SYMBOLS = 40, 30  # a random DFA: about 20 distinct targets per state


def _need_dot():
    if shutil.which("dot") is None:
        if REQUIRE_BROWSER:
            pytest.fail("the Graphviz `dot` binary is required (STATESEER_REQUIRE_BROWSER=1)")
        pytest.skip("the Graphviz `dot` binary is not installed")


def _with_dfa(run, *, counts: bool = True, n_states: int = N_STATES,
              n_symbols: int = N_SYMBOLS):
    """Save a random complete DFA over the run's classes as its extracted DFA: dense, as
    a text run's is (extracting the small text run's own needs more memory than a test
    may take)."""
    from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA
    from stateseer.abstraction.automata.fsm import FSM
    from stateseer.core import layout

    rng = np.random.default_rng(0)
    shape = (n_states, n_symbols)
    dfa = ExtractedDFA(alphabet=tuple(f"w{i}" for i in range(n_symbols)),
                       classes=FSM.load(run / "abstraction" / layout.FSM).classes,
                       transitions=rng.integers(0, n_states, shape),
                       state_class=rng.integers(0, 2, n_states),
                       counts=rng.integers(0, 50, shape) if counts else None)
    dfa.save(run / "abstraction" / layout.DFA, overwrite=True)
    return dfa


def _edges(dot_text: str) -> list[tuple[str, str, dict]]:
    """(source, target, attributes) of every state-to-state edge of a DOT export."""
    out = []
    for line in dot_text.splitlines():
        head, _, rest = line.strip().partition(" [")
        if "->" in head and not head.startswith("__start0"):
            src, dst = (p.strip() for p in head.split("->"))
            attrs = {k: re.sub(r"\\(.)", r"\1", v[1:-1]) if v.startswith('"') else v
                     for k, v in _ATTR.findall(rest)}
            out.append((src, dst, attrs))
    return out


def _cli(argv, capsys) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err.strip()


@pytest.mark.parametrize("counts", [True, False])
def test_a_dfa_drawing_keeps_the_heaviest_edges_per_state_and_says_so(
        explored_run, copy_run, tmp_path, capsys, counts):
    """A DFA's dot honours --top-k as the FSM's does: its transitions merged per state
    pair, the k heaviest (by training count; by symbols carried when it has no counts)
    kept per state, and a note says what was left out; --top-k 0 keeps every symbol."""
    from stateseer.app.workflows.exports import dfa_state_edges

    run = copy_run(explored_run)
    dfa = _with_dfa(run, counts=counts)
    merged = dfa_state_edges(dfa)
    rc, err = _cli(["export", run, "--dfa", "--format", "dot", "--top-k", "2",
                    "--out", tmp_path / "top2.dot"], capsys)
    assert rc == 0
    drawn = _edges((tmp_path / "top2.dot").read_text())
    assert len(drawn) == 2 * N_STATES < len(merged)
    weight = (lambda e: e["count"]) if counts else (lambda e: len(e["tokens"]))
    for q in range(N_STATES):
        kept = sorted(weight(e) for e in merged if e["source"] == q
                      and ("s" + str(q), f"s{e['target']}") in {(a, b) for a, b, _ in drawn})
        assert kept == sorted(weight(e) for e in merged if e["source"] == q)[-2:]
    assert f"drew {2 * N_STATES} of the DFA's {len(merged):,} state-to-state edges" in err
    assert ("by training count" if counts else "by symbols carried") in err
    assert "--top-k 0 draws every edge" in err
    rc, err = _cli(["export", run, "--dfa", "--format", "dot", "--top-k", "0",
                    "--out", tmp_path / "all.dot"], capsys)
    every = _edges((tmp_path / "all.dot").read_text())
    assert rc == 0 and "of the DFA's" not in err and len(every) == len(merged)
    symbols = [t for _, _, a in every for t, _ in json.loads(a["tokens"])]
    assert sorted(symbols) == sorted(dfa.alphabet * N_STATES)  # merged, none lost


def test_the_default_dfa_drawing_is_pruned_and_rendered(explored_run, copy_run, tmp_path,
                                                        capsys):
    """Without --top-k a DFA's svg keeps 4 edges per state, as the FSM's, and renders."""
    _need_dot()
    run = copy_run(explored_run)
    _with_dfa(run, n_states=12, n_symbols=20)
    rc, err = _cli(["export", run, "--dfa", "--format", "svg", "--out", tmp_path / "d.svg"],
                   capsys)
    svg = (tmp_path / "d.svg").read_text()
    assert rc == 0 and "the top 4 per state" in err
    assert svg.count('class="edge"') == 12 * 4 + 1  # and the start arrow


@pytest.mark.parametrize("dfa", [True, False])
def test_a_drawing_too_big_to_lay_out_is_refused_before_graphviz(
        explored_run, copy_run, tmp_path, capsys, monkeypatch, dfa):
    """svg/png/pdf (and the FSM's html page) of more edges than Graphviz lays out in time
    is refused in one line naming a --top-k that fits, and Graphviz never starts (it used
    to run for minutes)."""
    import stateseer.app.workflows.exports as exports
    from stateseer.core.rundir import RunDir

    def no_graphviz(*_a, **_k):
        raise AssertionError("Graphviz was called")

    monkeypatch.setattr("stateseer.abstraction.automata.export.render", no_graphviz)
    run = copy_run(explored_run)
    if dfa:
        n_states = _with_dfa(run).n_states
    else:  # the small run's FSM: a bound it exceeds
        n_states = exports.load_run_fsm(RunDir(run))[0].n_states
        monkeypatch.setattr(exports, "RENDERED_MAX_EDGES", 2 * n_states)
    k = exports.RENDERED_MAX_EDGES // n_states
    for fmt in ("svg", "png", "pdf", *(() if dfa else ("html",))):
        rc, err = _cli(["export", run, *(["--dfa"] if dfa else []), "--format", fmt,
                        "--top-k", "0", "--out", tmp_path / f"x.{fmt}"], capsys)
        assert rc == 2 and err.count("\n") == 0, err
        assert "too many for Graphviz" in err and f"--top-k {k}" in err, err
        assert "--format dot or json" in err and not (tmp_path / f"x.{fmt}").exists()


@pytest.mark.exe
def test_graphviz_is_stopped_when_a_layout_takes_too_long():
    from stateseer.abstraction.automata.export import render
    from stateseer.abstraction.errors import AbstractionError

    _need_dot()
    rng = np.random.default_rng(0)
    edges = "\n".join(f"s{q} -> s{t} [label=\"a,b,c (+9)\"];" for q in range(190)
                      for t in rng.choice(190, 4, replace=False))
    with pytest.raises(AbstractionError, match="did not lay out") as e:
        render(f"digraph g {{\n{edges}\n}}\n", "svg", seconds=1)
    assert "--top-k" in one_line(e.value)


@pytest.mark.parametrize("fmt", ["html", "traces-csv"])
def test_formats_that_do_not_take_the_dfa_refuse_it_naming_those_that_do(
        explored_run, copy_run, tmp_path, capsys, fmt):
    from stateseer.abstraction.automata.export import EXPORT_FORMATS

    run = copy_run(explored_run)
    _with_dfa(run)
    rc, err = _cli(["export", run, "--dfa", "--format", fmt, "--out", tmp_path / "x"],
                   capsys)
    assert rc == 2 and err.count("\n") == 0 and not (tmp_path / "x").exists(), err
    assert "not the DFA" in err if fmt == "html" else "--dfa does not apply" in err
    takes = err.split("export the DFA as ")[1]
    assert all(name in takes for name, spec in EXPORT_FORMATS.items()
               if spec.kind != "traces")
    assert "traces-csv" not in takes and "html" not in takes


def test_an_existing_file_is_refused_in_the_cli_s_words(explored_run, tmp_path, capsys):
    """The CLI names --force; the Python API keeps its overwrite=True."""
    from stateseer.abstraction.errors import AbstractionError
    from stateseer.app.workflows.exports import export_run

    out = tmp_path / "fsm.json"
    out.write_text("{}")
    for fmt in ("json", "html"):
        rc, err = _cli(["export", explored_run, "--format", fmt, "--out", out], capsys)
        assert rc == 2 and "pass --force" in err and "overwrite=True" not in err, err
    assert out.read_text() == "{}"
    with pytest.raises(AbstractionError, match="overwrite=True"):
        export_run(explored_run, "json", out)
    rc, _ = _cli(["export", explored_run, "--format", "json", "--force", "--out", out], capsys)
    assert rc == 0 and json.loads(out.read_text())["format"] == "stateseer.fsm"
