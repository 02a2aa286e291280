"""``stateseer extract-dfa --examples FILE`` and ``--merge-to N`` on a real (tiny) Tomita run.

The run is the session's Tomita 3 LSTM (tests/conftest.py), recorded once here. A small
state budget makes the plain extraction wrong on some strings the RNN gets right; those
strings, given as examples, must come out right.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from stateseer.app.cli.main import main
from stateseer.app.workflows.dfa import extract_run_dfa, read_examples
from stateseer.core.errors import StateseerError
from stateseer.core.traces import Traces
from stateseer.rnn_models.formal import GRAMMARS
from tests.conftest import one_line

BUDGET = 3  # few enough states that the plain automaton misclassifies strings


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tomita_run):
    """A copy of the Tomita 3 run with its train and test splits recorded."""
    import shutil

    import torch

    from stateseer.rnn_models.engine import record_run

    run = tmp_path_factory.mktemp("dfa_examples") / "t3"
    shutil.copytree(tomita_run, run)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        record_run(run, splits=("train", "test"))
    finally:
        torch.set_num_threads(threads)
    return run


def _rnn_predictions(run) -> dict[str, int]:
    test = Traces(run / "traces")["test"]
    return dict(zip(test.texts, test.predictions.tolist(), strict=True))


def _wrong_but_rnn_right(run, dfa, limit: int = 3) -> list[str]:
    """Short strings the DFA misclassifies while the RNN (and the grammar) gets them right."""
    rnn = _rnn_predictions(run)
    grammar = GRAMMARS["tomita3"].dfa
    strings = sorted((s for s in rnn if len(s) <= 8), key=lambda s: (len(s), s))
    got = dfa.classify(strings)
    want = grammar.accepts(strings).astype(np.int64)  # class 1 = accept for the grammars
    return [s for s, g, w in zip(strings, got, want, strict=True)
            if g != w and rnn[s] == w][:limit]


def test_examples_the_plain_dfa_gets_wrong_are_right_after(recorded, tmp_path):
    plain = extract_run_dfa(recorded, max_states=BUDGET)
    wrong = _wrong_but_rnn_right(recorded, plain)
    assert wrong, "the small budget should leave some string misclassified"
    classes = plain.classes
    grammar = GRAMMARS["tomita3"].dfa
    path = tmp_path / "examples.tsv"
    lines = ["# strings whose answer I know"]
    lines += [f"{s}\t{classes[int(grammar.accepts([s])[0])]}" for s in wrong]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    dfa = extract_run_dfa(recorded, max_states=BUDGET, examples=path)
    labels = grammar.accepts(wrong).astype(np.int64)
    assert dfa.classify(wrong).tolist() == labels.tolist()
    ex = dfa.report["examples"]
    assert ex == {"n": len(wrong), "dfa_correct": len(wrong), "rnn_correct": len(wrong),
                  "dfa_correct_where_rnn_correct": len(wrong), "dfa_wrong": []}
    saved = json.loads((recorded / "metrics.json").read_text())["abstraction"]["dfa"]
    assert saved["examples"]["dfa_correct"] == len(wrong)


def test_an_example_the_rnn_disagrees_with_is_reported_not_forced(recorded, tmp_path):
    """The DFA models the RNN: a wrong label is counted against both, not learned."""
    rnn = _rnn_predictions(recorded)
    s = "0110"
    truth = int(GRAMMARS["tomita3"].dfa.accepts([s])[0])
    assert rnn[s] == truth
    path = tmp_path / "examples.tsv"
    path.write_text(f"{s}\t{['reject', 'accept'][1 - truth]}\n", encoding="utf-8")
    dfa = extract_run_dfa(recorded, examples=path)
    ex = dfa.report["examples"]
    assert ex["rnn_correct"] == 0 and ex["dfa_correct"] == 0 and ex["dfa_wrong"] == [s]


def test_cli_examples_and_states(recorded, tmp_path, capsys):
    path = tmp_path / "examples.tsv"
    path.write_text("0110\taccept\n\taccept\n", encoding="utf-8")
    assert main(["extract-dfa", str(recorded), "--examples", str(path), "--merge-to", "4"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["n_states"] <= 4
    assert out["examples"]["n"] == 2 and out["examples"]["rnn_correct"] == 2
    assert out["examples"]["dfa_correct"] == 2


@pytest.mark.parametrize("text, where, fix", [
    ("0110 accept\n", "line 1", "tab"),
    ("0110\taccept\n\n1\tmaybe\n", "line 3", "use one of"),
    ("# comment\n0120\treject\n", "line 2", "use only 0, 1"),
    ("0\taccept\textra\n", "line 1", "single tab"),
    ("# nothing\n\n", "holds no examples", "STRING<TAB>LABEL"),
])
def test_malformed_examples_file_is_one_line_naming_line_and_fix(recorded, tmp_path, capsys,
                                                                 text, where, fix):
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(StateseerError) as err:
        read_examples(path, ["reject", "accept"], ("0", "1"), "char")
    msg = one_line(err.value)
    assert where in msg and fix in msg and str(path) in msg
    assert main(["extract-dfa", str(recorded), "--examples", str(path)]) == 2
    err_line = capsys.readouterr().err.strip()
    assert err_line.startswith("stateseer: error: --examples") and "\n" not in err_line
    assert where in err_line and fix in err_line


def test_missing_examples_file(tmp_path):
    with pytest.raises(StateseerError) as err:
        read_examples(tmp_path / "nope.tsv", ["reject", "accept"], ("0", "1"), "char")
    assert "cannot be read" in one_line(err.value)


def test_active_extraction_asks_the_model_and_finds_the_exact_minimal_dfa(recorded):
    dfa = extract_run_dfa(recorded, method="active", seconds=60)
    r = dfa.report
    assert r["method"] == "active" and not r["budget_exhausted"]
    assert r["minimal_size_match"] and r["grammar_agreement_le12"] == 1.0
    assert r["membership_queries"] > 0 and r["rounds"] >= 1
    assert r["heldout_error"] == 0.0 and r["majority_error"] > 0.1  # beside the majority
    assert dfa.visits.sum() > 0 and dfa.counts.sum() > 0  # the explorer's figures
    saved = json.loads((recorded / "metrics.json").read_text())["abstraction"]["dfa"]
    assert saved["method"] == "active" and saved["n_states"] == dfa.n_states
    again = type(dfa).load(recorded / "abstraction" / "dfa.json")
    assert again.report["method"] == "active"


def test_auto_is_active_with_a_model_and_refine_where_active_cannot_run(recorded, tmp_path):
    import shutil

    assert extract_run_dfa(recorded).report["method"] == "active"
    assert extract_run_dfa(recorded, states=4).report["method"] == "refine"
    imported = tmp_path / "imported"
    shutil.copytree(recorded, imported)
    cfg = json.loads((imported / "config.json").read_text())
    cfg["model"] = {"kind": "imported", "arch": "imported"}
    (imported / "config.json").write_text(json.dumps(cfg))
    assert extract_run_dfa(imported).report["method"] == "refine"
    with pytest.raises(StateseerError) as err:
        extract_run_dfa(imported, method="active")
    assert "--method refine" in one_line(err.value)
    with pytest.raises(StateseerError, match="belong to --method refine"):
        extract_run_dfa(recorded, method="active", states=3)


def test_active_extraction_refuses_more_than_two_classes_in_one_line():
    from types import SimpleNamespace

    from stateseer.abstraction.automata.dfa.queried import extract_dfa_active
    from stateseer.abstraction.errors import AbstractionError

    traces = SimpleNamespace(classes=["neg", "neu", "pos"])
    with pytest.raises(AbstractionError) as err:
        extract_dfa_active(traces, lambda ws: [], None)
    assert "two classes" in one_line(err.value) and "--method refine" in one_line(err.value)


def test_the_cli_runs_the_active_learner_and_says_so(recorded, capsys):
    assert main(["extract-dfa", str(recorded), "--method", "active", "--seconds", "30"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["method"] == "active" and out["membership_queries"] > 0
    assert out["minimal_size_match"] is True


def test_the_cli_passes_the_tests_and_the_near_words_to_the_learner(recorded, capsys):
    assert main(["extract-dfa", str(recorded), "--method", "active", "--seconds", "30",
                 "--tests-on", "prefixes", "--mutants", "40"]) == 0
    saved = json.loads((recorded / "metrics.json").read_text())["abstraction"]["dfa"]
    assert saved["tests_on"] == "prefixes" and saved["n_selection_mutants"] == 40
    assert saved["minimal_size_match"] is True  # the exact language all the same
    assert main(["extract-dfa", str(recorded), "--method", "active", "--seconds", "30"]) == 0
    saved = json.loads((recorded / "metrics.json").read_text())["abstraction"]["dfa"]
    # whole words by default; no near words by default
    assert saved["tests_on"] == "words" and saved["n_selection_mutants"] == 0
    assert saved["minimal_size_match"] is True
    assert main(["extract-dfa", str(recorded), "--mutants", "-1"]) == 2
    assert "--mutants" in capsys.readouterr().err


def test_auto_refines_where_the_alphabet_is_too_large_to_ask_about(recorded, monkeypatch):
    import stateseer.app.workflows.dfa as dfa_workflow

    monkeypatch.setattr(dfa_workflow, "ACTIVE_ALPHABET", 1)  # Tomita's {0, 1} is too many
    assert extract_run_dfa(recorded).report["method"] == "refine"


def test_exports_say_which_method_built_the_automaton(recorded, tmp_path):
    import networkx as nx

    from stateseer.app.workflows.exports import export_run

    extract_run_dfa(recorded, method="active", seconds=30)
    export_run(recorded, "dot", tmp_path / "dfa.dot", dfa=True)
    assert 'stateseer_method="active"' in (tmp_path / "dfa.dot").read_text()
    export_run(recorded, "graphml", tmp_path / "dfa.graphml", dfa=True)
    g = nx.read_graphml(tmp_path / "dfa.graphml")
    assert g.graph["method"] == "active" and g.graph["membership_queries"] > 0
    # Tomita's exact automaton is right off the data too; the majority is not
    assert g.graph["off_data_error"] == 0.0 and g.graph["off_data_majority_error"] > 0
    extract_run_dfa(recorded, method="refine")
    export_run(recorded, "graphml", tmp_path / "refined.graphml", dfa=True)
    assert nx.read_graphml(tmp_path / "refined.graphml").graph["method"] == "refine"
