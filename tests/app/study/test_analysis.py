"""study-analyze against simulated participants with a known effect, and its pure parts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stateseer.app.study.analysis import analyze_rows, analyze_study, per_condition, report_html
from stateseer.app.study.spec import StudyError
from tests.conftest import one_line


@pytest.fixture(scope="module")
def context(explored_run):
    from stateseer.app.explorer.context import ExplorerContext

    return ExplorerContext.load(explored_run)


def test_a_known_effect_is_found_and_its_interval_covers_it(context, tmp_path):
    from stateseer.testing import simulated_study

    truth = simulated_study(context, tmp_path / "s.sqlite", n_participants=16, d=1.0, seed=3)
    doc = analyze_study(tmp_path / "s.sqlite", tmp_path / "out")
    assert doc["design"] == "latin" and doc["n_participants"] == 16
    assert doc["conditions"] == ["baseline", "full"]
    time_s = doc["outcomes"]["time_s"]
    m = time_s["model"]
    assert m["method"] == "mixedlm" and m["reference"] == "baseline" and m["n"] == 16 * 8
    assert m["p_value"] < 0.05 and m["ci"][0] <= truth <= m["ci"][1] and m["effect"] < 0
    assert time_s["per_condition"]["full"]["n_participants"] == 16
    # no effect was put on correctness or on SUS: neither is found
    assert doc["outcomes"]["correct"]["model"]["p_value"] > 0.05
    assert doc["outcomes"]["sus"]["model"]["p_value"] > 0.05
    assert set(json.loads((tmp_path / "out" / "analysis.json").read_text())) >= {
        "n_participants", "conditions", "design", "outcomes"}
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("<img") == 3 and "data:image/png;base64," in page
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched from anywhere


def test_no_effect_is_not_found(context, tmp_path):
    from stateseer.testing import simulated_study

    truth = simulated_study(context, tmp_path / "n.sqlite", n_participants=16, d=0.0, seed=5)
    m = analyze_study(tmp_path / "n.sqlite", tmp_path / "out")["outcomes"]["time_s"]["model"]
    assert truth == 0 and m["p_value"] > 0.05 and m["ci"][0] <= 0 <= m["ci"][1]


def _row(pid, cond, score, pos=0, failed=0):
    return {"pid": pid, "condition": cond, "position": pos, "task": "sus",
            "answer_type": "sus", "seconds": 30.0, "timed_out": False, "correct": None,
            "score": score, "failed_checks": failed}


def test_a_questionnaire_asked_once_between_subjects_is_an_ols():
    rows = [_row(f"a{k}", "full", s) for k, s in enumerate([70, 75, 80, 85])] + \
        [_row(f"b{k}", "baseline", s) for k, s in enumerate([50, 55, 60, 65])]
    doc = analyze_rows(rows, design="between")
    m = doc["outcomes"]["sus"]["model"]
    assert m["method"] == "ols" and m["effect"] == 20.0  # the difference of the means
    per = doc["outcomes"]["sus"]["per_condition"]
    assert per["full"]["mean"] == 77.5 and per["full"]["n_participants"] == 4
    from scipy.stats import t

    half = t.ppf(0.975, 3) * np.std([70, 75, 80, 85], ddof=1) / 2
    assert per["full"]["ci"] == [round(77.5 - half, 4), round(77.5 + half, 4)]


def test_participants_are_the_units_of_the_interval():
    rows = [{"pid": "a", "condition": "x", "y": v} for v in (1.0, 1.0, 1.0, 1.0)] + \
        [{"pid": "b", "condition": "x", "y": 3.0}]
    out = per_condition(rows, "y", ["x"])["x"]
    assert out["mean"] == 2.0 and out["n"] == 5 and out["n_participants"] == 2


def test_failed_checks_can_leave_participants_out_and_names_are_escaped():
    rows = [_row("p1", "<script>alert(1)</script>", 60, failed=1),
            *(_row(f"p{k}", "<script>alert(1)</script>", 60 + k) for k in range(2, 5)),
            *(_row(f"q{k}", "plain", 50 + k) for k in range(4))]
    doc = analyze_rows(rows, design="between", exclude_failed_checks=True)
    assert doc["excluded_failed_checks"] == ["p1"] and doc["n_participants"] == 7
    page = report_html(doc)
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    kept = analyze_rows(rows, design="between")
    assert kept["n_participants"] == 8 and kept["failed_checks"] == {"p1": 1}
    assert "failed a check and are included" in report_html(kept)


def test_bad_input_is_one_line(tmp_path, capsys):
    from stateseer.app.cli.main import main
    from stateseer.app.study.store import StudyLog

    log = StudyLog(tmp_path / "empty.sqlite", study="s")
    log.close()
    with pytest.raises(StudyError) as err:
        analyze_study(tmp_path / "empty.sqlite", tmp_path / "o")
    assert "no submitted answers yet" in one_line(err.value)
    assert not (tmp_path / "o").exists()
    (tmp_path / "junk.sqlite").write_text("not a database")
    assert main(["study-analyze", str(tmp_path / "junk.sqlite"), "--out",
                 str(tmp_path / "o2")]) != 0
    assert "not a stateseer study database" in capsys.readouterr().err


def test_the_command_prints_each_outcome(context, tmp_path, capsys):
    from stateseer.app.cli.main import main
    from stateseer.testing import simulated_study

    simulated_study(context, tmp_path / "c.sqlite", n_participants=6, d=1.0, seed=0)
    assert main(["study-analyze", str(tmp_path / "c.sqlite"), "--out",
                 str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("correct: baseline")
    assert "time_s: baseline" in out and "mixedlm" in out and "report.html" in out
