"""One self-contained HTML page for the FSM or for one input's trace: what it holds, its
size, that it asks for nothing over the network, and that names from the run stay text."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from stateseer.app.cli.main import main
from stateseer.app.workflows.html_export import fsm_html, trace_html
from stateseer.core.errors import StateseerError
from tests.conftest import one_line

EVIL = "<img src=x onerror=alert(1)>"


def _fetches(page: str) -> list[str]:
    """Anything that would make the browser ask the network for something."""
    return re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//[^"' >]+|<link\b|"""
                      r"""<script[^>]*\bsrc=|@import|url\(\s*["']?https?:""", page, re.I)


@pytest.fixture(scope="module")
def run40(tmp_path_factory, explored_run):
    """The small run abstracted into 40 states, in a folder whose name is markup."""
    from stateseer.abstraction.pipeline import abstract_run

    dst = tmp_path_factory.mktemp("html") / EVIL
    shutil.copytree(explored_run, dst)
    abstract_run(dst, n_states=40)
    return dst


def test_the_fsm_page_draws_every_state_with_its_card(run40):
    from stateseer.app.workflows.runview import RunView

    page = fsm_html(run40)
    rv = RunView(run40)
    assert len(page.encode()) <= 1_000_000  # the limit for a 40-state FSM
    assert not _fetches(page)
    drawn = set(re.findall(r"<title>s(\d+)</title>", page))
    assert len(drawn) == rv.fsm.n_states  # every state, the start state included
    cards = json.loads(re.search(r"<script type='application/json' id='cards'>(.*?)</script>",
                                 page, re.S).group(1).replace("<\\/", "</"))
    assert set(cards["states"]) == {str(s) for s in range(rv.fsm.n_states)}
    s1 = cards["states"]["1"]
    assert s1["visits"] == int(rv.fsm.visits[1])
    assert abs(sum(m["p"] for m in s1["mix"]) - 1) < 1e-3
    acc = rv.metrics["test_accuracy"]
    assert f"{acc:.3f}" in page and "simulation fidelity" in page and "chance" in page
    # the run's name is markup: shown as text, never parsed
    assert EVIL not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_string_from_the_run_cannot_close_the_data_block(run40):
    from stateseer.app.workflows.runview import RunView

    rv = RunView(run40)
    rv.abstraction.patterns["ngrams"][1]["lift"] = [
        {"ngram": "</script><script>window.__pwned=1</script>", "count": 5, "lift": 9.9}]
    page = fsm_html(rv)
    assert "</script><script>window.__pwned" not in page
    block = re.search(r"id='cards'>(.*?)</script>", page, re.S).group(1)
    doc = json.loads(block)  # "<\/" is a valid JSON escape of "/"
    assert doc["states"]["1"]["ngrams"][0][0] == "</script><script>window.__pwned=1</script>"


def test_the_trace_page_holds_tokens_states_chart_and_attribution(run40):
    from stateseer.app.workflows.runview import RunView

    rv = RunView(run40)
    tr = rv.traces["test"]
    iid = int(tr.rows[3])
    page = trace_html(run40, iid)
    assert len(page.encode()) <= 300_000 and not _fetches(page)
    rec = rv.trace_instance("test", 3)
    chips = re.findall(r"<span class='tok[^']*' style='background:#[0-9a-f]{6};color:"
                       r"#[0-9a-f]{3,6}' title='[^']*'>(.*?)<span class='st'>s(\d+)</span>", page)
    assert [int(s) for _, s in chips] == list(rec.states[1:])
    assert len(chips) == rec.n_tokens
    assert page.count("<polyline") == len(rv.classes)
    assert "Attribution (integrated gradients" in page
    with pytest.raises(StateseerError) as err:
        trace_html(run40, 10**9)
    assert "not in split 'test'" in one_line(err.value)


def test_the_export_command_writes_both_pages(run40, tmp_path, capsys):
    out = tmp_path / "fsm.html"
    assert main(["export", str(run40), "--format", "html", "--out", str(out)]) == 0
    assert out.read_text().startswith("<!doctype html>")
    from stateseer.core.traces import Traces

    iid = int(Traces(run40 / "traces")["test"].rows[0])
    one = tmp_path / "one.html"
    assert main(["export", str(run40), "--format", "html", "--input", str(iid),
                 "--out", str(one)]) == 0
    assert f"Input #{iid}" in one.read_text()
    capsys.readouterr()
    assert main(["export", str(run40), "--format", "svg", "--input", "1",
                 "--out", str(tmp_path / "x.svg")]) != 0
    assert "--input is for --format html" in capsys.readouterr().err
    assert main(["export", str(run40), "--format", "html", "--dfa",
                 "--out", str(tmp_path / "d.html")]) != 0
    assert not (tmp_path / "x.svg").exists() and not (tmp_path / "d.html").exists()


def test_an_empty_input_is_a_trace_of_one_state_in_every_export(explored_tomita, tmp_path):
    """#53: the empty string of a formal language has no tokens; its page shows the one
    state it is in and the one prediction it gets (no numpy error), in the exported page
    and in a notebook's fragment alike."""
    import numpy as np

    from stateseer.app.workflows.fragments import trace_fragment
    from stateseer.app.workflows.runview import RunView

    rv = RunView(explored_tomita)
    split, k = next((s, int(np.flatnonzero(np.diff(rv.traces[s].offsets) == 0)[0]))
                    for s in rv.splits if (np.diff(rv.traces[s].offsets) == 0).any())
    row = int(rv.traces[split].rows[k])
    out = tmp_path / "empty.html"
    assert main(["export", str(explored_tomita), "--format", "html", "--input", str(row),
                 "--split", split, "--out", str(out)]) == 0
    page = out.read_text()
    tr = rv.trace_instance(split, k)
    assert not tr.tokens and "(empty input)" in page and f"s{tr.states[0]}" in page
    assert page.count("<circle") == len(rv.classes)  # the one prediction, per class
    frag = trace_fragment(tr, list(rv.classes))
    assert "(empty input)" in frag and "<circle" in frag
