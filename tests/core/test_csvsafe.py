"""Every CSV stateseer writes, fed hostile class names and tokens: no cell that a
spreadsheet would run as a formula (OWASP CSV injection)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from stateseer.core.csvsafe import FORMULA_PREFIXES, escape_cell

EVIL = '=HYPERLINK("http://evil.example/c","c")'


def _cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row]


def _live(text: str) -> list[str]:
    return [c for c in _cells(text) if c.startswith(FORMULA_PREFIXES)]


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    from stateseer import TrainConfig, abstract_run, record_run, train_run

    where = tmp_path_factory.mktemp("hostile")
    rows = []
    for i in range(240):
        lab = [EVIL, "+SUM(1)", "@cmd"][i % 3]
        word = ["good", "bad", "plot"][i % 3]
        rows.append({"text": f"=1+2 {word} -x @A1 {word} {i % 7}", "label": lab})
    path = where / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = train_run(TrainConfig(dataset=f"jsonl:{path}", tokenizer="space", epochs=2,
                                hidden=8, embed=8), where / "run", progress=False)
    record_run(run)
    abstract_run(run, n_states=4)
    return run.path


def test_the_traces_csv_export_runs_no_formula(hostile_run, tmp_path):
    from stateseer.app.workflows.exports import export_run

    out = export_run(hostile_run, "traces-csv", tmp_path / "traces.csv")
    text = out.read_text(encoding="utf-8")
    assert "'" + EVIL in _cells(text)  # the class name is there, as text
    assert _live(text) == []


def test_the_explorer_table_download_runs_no_formula(hostile_run):
    from stateseer.app.explorer import ids
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.view import Trigger
    from stateseer.app.explorer.views import table

    ctx = ExplorerContext.load(hostile_run)
    doc = table.table_csv(ctx, Trigger(ids.DL_TABLE, 1), 1, None, "", [], None, None, None)
    assert len(_cells(doc["content"])) > 50 and _live(doc["content"]) == []


def test_the_study_exports_run_no_formula():
    from stateseer.app.study.export import to_csv

    text = to_csv([{"pid": EVIL, "condition": "+1", "link": "@x"}],
                  ("pid", "condition", "link"))
    assert _live(text) == [] and escape_cell(EVIL) in _cells(text)
