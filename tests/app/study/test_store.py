"""The study log: assignment stored once, events with their context, export, errors."""

from __future__ import annotations

import csv
import json
import sqlite3
import threading
from collections import Counter

import pytest

from stateseer.app.cli.main import main
from stateseer.app.study.assign import choose_condition
from stateseer.app.study.export import export_study
from stateseer.app.study.spec import Assignment, StudyError
from stateseer.app.study.store import StudyLog, UnknownParticipant
from tests.conftest import one_line

CONDS = ["full", "baseline"]
DEFAULT = Assignment()


@pytest.fixture
def log(tmp_path):
    log = StudyLog(tmp_path / "log.sqlite", study="s1")
    yield log
    log.close()


def _join(log, pid, rule=DEFAULT):
    return log.join(pid, lambda counts: choose_condition(rule, CONDS, pid, counts))


def test_counterbalanced_assignment_alternates_and_persists(tmp_path, log):
    got = [_join(log, f"P{i:02d}")["condition"] for i in range(6)]
    assert got == ["full", "baseline"] * 3
    again = _join(log, "P00")
    assert again == {"pid": "P00", "condition": "full", "method": "counterbalanced",
                     "new": False}
    log.close()
    reopened = StudyLog(tmp_path / "log.sqlite", study="s1")  # a restarted server
    try:
        assert _join(reopened, "P01")["condition"] == "baseline"
        assert _join(reopened, "P06")["condition"] == "full"
    finally:
        reopened.close()


def test_counterbalancing_counts_preassigned_participants(log):
    rule = Assignment(participants={"X1": "full", "X2": "full"})
    assert _join(log, "X1", rule)["method"] == "preassigned"
    _join(log, "X2", rule)
    assert [_join(log, p, rule)["condition"] for p in ("A", "B", "C")] == \
        ["baseline", "baseline", "full"]


def test_concurrent_arrivals_stay_balanced(log):
    threads = [threading.Thread(target=_join, args=(log, f"P{i}")) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = Counter(r[0] for r in log.read("SELECT condition FROM participants"))
    assert counts == {"full": 20, "baseline": 20}
    ordinals = sorted(r[0] for r in log.read("SELECT ordinal FROM participants"))
    assert ordinals == list(range(40))


def test_seeded_random_assignment_is_reproducible():
    rule = Assignment(method="random", seed=11)
    pids = [f"P{i:03d}" for i in range(200)]
    first = [choose_condition(rule, CONDS, p, {})[0] for p in pids]
    assert first == [choose_condition(rule, CONDS, p, {"full": 5})[0] for p in pids]
    assert 70 < first.count("full") < 130
    other = [choose_condition(Assignment(method="random", seed=12), CONDS, p, {})[0]
             for p in pids]
    assert other != first
    assert choose_condition(Assignment(method="fixed", condition="baseline"), CONDS, "P",
                            {}) == ("baseline", "fixed")


def test_events_carry_participant_condition_task_and_utc_time(log):
    _join(log, "P01")
    assert log.start_task("P01", "t1", 0)["new"] is True
    first = log.start_task("P01", "t1", 0)
    assert first["new"] is False  # a reload keeps the start time
    i = log.log("P01", "state_clicked", {"state": 4})
    row = dict(log.read("SELECT * FROM events WHERE id = ?", (i,))[0])
    assert row["pid"] == "P01" and row["condition"] == "full" and row["task"] == "t1"
    assert row["ts"].endswith("Z") and len(row["ts"]) == 24
    assert json.loads(row["payload"]) == {"state": 4} and row["source"] == "ui"
    assert log.submit("P01", "t1", {"type": "text", "value": "<b>x</b>"})["seconds"] >= 0
    assert log.submit("P01", "t1", {"type": "text", "value": "again"}) is None  # once
    j = log.log("P01", "late", {})
    assert log.read("SELECT task FROM events WHERE id = ?", (j,))[0][0] is None
    kinds = [r[0] for r in log.read("SELECT kind FROM events ORDER BY id")]
    assert kinds == ["participant_joined", "task_started", "state_clicked",
                     "task_submitted", "late"]
    with pytest.raises(UnknownParticipant) as err:
        log.log("nobody", "x", {})
    assert "has not joined" in one_line(err.value)


def test_threads_write_without_losing_events(log):
    for p in range(8):
        _join(log, f"P{p}")
    ids: list[int] = []
    lock = threading.Lock()

    def work(p):
        for k in range(50):
            got = log.log(f"P{p}", "tick", {"k": k})
            with lock:
                ids.append(got)

    threads = [threading.Thread(target=work, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 400
    assert log.read("SELECT COUNT(*) FROM events WHERE kind = 'tick'")[0][0] == 400
    mode = log.read("PRAGMA journal_mode")[0][0]
    assert mode == "wal"


def test_a_failed_write_does_not_spoil_its_batch(log):
    _join(log, "P01")
    with pytest.raises(StudyError):
        log.submit("P01", "never-started", {"v": 1})
    assert log.log("P01", "ok", {}) > 0


def test_another_studys_database_is_refused(tmp_path, log):
    log.close()
    with pytest.raises(StudyError) as err:
        StudyLog(tmp_path / "log.sqlite", study="s2")
    assert "holds study 's1', not 's2'" in one_line(err.value)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StudyError) as err:
        StudyLog(junk, study="s1")
    assert "not a SQLite database" in one_line(err.value)


def _fill(log):
    for pid in ("P01", "P02"):
        _join(log, pid)
        log.start_task(pid, "t1", 0)
        log.log(pid, "state_clicked", {"state": 2})
        log.submit(pid, "t1", {"type": "text", "value": f'answer of {pid}, "quoted"'})
        log.start_task(pid, "t2", 1)
    log.submit("P01", "t2", {"type": "instances", "value": [3, 4]})


def test_export_writes_events_answers_and_summary(tmp_path, log):
    _fill(log)
    out = tmp_path / "out"
    written = export_study(log.path, out)
    assert set(written) == {"events", "answers", "summary", "coding"}
    with open(written["summary"], newline="", encoding="utf-8") as fh:
        summary = list(csv.DictReader(fh))
    assert [(r["pid"], r["task"], r["status"]) for r in summary] == [
        ("P01", "t1", "done"), ("P01", "t2", "done"), ("P02", "t1", "done"),
        ("P02", "t2", "in progress")]
    assert summary[0]["n_events"] == "3"  # started, clicked, submitted
    assert summary[0]["answer"] == 'answer of P01, "quoted"'
    assert summary[1]["answer"] == "3 4" and float(summary[0]["seconds"]) >= 0
    with open(written["answers"], newline="", encoding="utf-8") as fh:
        answers = list(csv.DictReader(fh))
    assert len(answers) == 3 and answers[2]["condition"] == "baseline"
    with open(written["events"], newline="", encoding="utf-8") as fh:
        events = list(csv.DictReader(fh))
    assert events[0]["kind"] == "participant_joined" and len(events) == 11


def test_export_command_and_its_errors(tmp_path, log, capsys):
    _fill(log)
    assert main(["study-export", str(log.path), "--out", str(tmp_path / "o")]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["written"]["summary"].endswith("summary.csv")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        assert main(["study-export", str(log.path), "--out", str(tmp_path / "p"),
                     "--format", "parquet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "needs pyarrow" in err and "--format csv" in err
    else:
        assert main(["study-export", str(log.path), "--out", str(tmp_path / "p"),
                     "--format", "parquet"]) == 0
    assert main(["study-export", str(tmp_path / "none.sqlite"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no study database" in err
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE x(a)").connection.commit()
    assert main(["study-export", str(other), "--out", str(tmp_path)]) == 2
    assert "not a stateseer study database" in capsys.readouterr().err


def test_latin_orders_by_arrival_are_balanced_and_kept(tmp_path, log):
    """Arrivals take the Williams design's rows in turn, concurrently too: over 8
    participants and 4 conditions every condition is in every position twice."""
    from stateseer.app.study.designs import williams

    conds = ["a", "b", "c", "d"]
    rule = Assignment(method="latin")
    threads = [threading.Thread(target=log.join, args=(f"P{i}", lambda counts, i=i:
               choose_condition(rule, conds, f"P{i}", counts))) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    orders = [log.condition_of(f"P{i}").split(">") for i in range(8)]
    assert sorted(orders) == sorted([[conds[c] for c in row] for row in williams(4)] * 2)
    for pos in range(4):
        assert Counter(o[pos] for o in orders) == {c: 2 for c in conds}
    assert log.join("P3", lambda counts: ("x", "latin"))["condition"] == ">".join(orders[3])


def test_a_log_written_before_tasks_kept_a_condition_is_read_and_extended(tmp_path):
    path = tmp_path / "old.sqlite"
    old = StudyLog(path, study="s1")
    _join(old, "P01")
    old.start_task("P01", "t1", 0)
    old.submit("P01", "t1", {"type": "text", "value": "x"})
    old.close()
    conn = sqlite3.connect(path)  # as the first version wrote it: no tasks.condition
    conn.executescript("ALTER TABLE tasks DROP COLUMN condition;")
    conn.close()
    from stateseer.app.study.export import answer_rows
    from stateseer.app.study.store import connect_log

    reader = connect_log(path)
    assert [a["condition"] for a in answer_rows(reader)] == ["full"]
    reader.close()
    new = StudyLog(path, study="s1")  # the server adds the column, old rows read as before
    try:
        new.start_task("P01", "t2", 1, condition="baseline")
        assert [(r["task"], r["condition"]) for r in new.progress("P01")] == [
            ("t1", None), ("t2", "baseline")]
        assert new.read("SELECT condition FROM events WHERE kind = 'task_started' "
                        "ORDER BY id")[-1][0] == "baseline"
    finally:
        new.close()


def test_open_answers_go_to_two_blind_coders_and_come_back_with_kappa(tmp_path, log):
    from sklearn.metrics import cohen_kappa_score

    for k in range(8):
        pid = f"P{k}"
        _join(log, pid)
        for t in ("why", "how"):
            log.start_task(pid, t, 0 if t == "why" else 1)
            log.submit(pid, t, {"type": "text", "value": f"{t} says {pid}"})
    out = tmp_path / "out"
    written = export_study(log.path, out)
    with open(written["coding"], newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["item", "pid", "task", "answer", "code_1", "code_2"]
    assert "condition" not in rows[0] and len(rows) == 16  # coders stay blind
    assert [r["task"] for r in rows] == ["how"] * 8 + ["why"] * 8
    assert [r["pid"] for r in rows[:8]] != sorted(r["pid"] for r in rows[:8])  # mixed
    c1 = ["bug", "bug", "bug", "bug", "data", "data", "data", "data"]
    c2 = ["bug", "data", "bug", "bug", "data", "data", "bug", "data"]
    for r, a, b in zip(rows[8:], c1, c2, strict=True):
        r["code_1"], r["code_2"] = a, b
    rows[0]["code_1"] = "bug"  # one coder only: not counted
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    written = export_study(log.path, out, coding=filled)
    with open(written["coding_agreement"], newline="", encoding="utf-8") as fh:
        agree = {r["task"]: r for r in csv.DictReader(fh)}
    assert set(agree) == {"why", "*"} and agree["why"]["n_coded"] == "8"
    assert float(agree["why"]["agreement"]) == 0.75
    assert float(agree["why"]["chance_agreement"]) == 0.5
    assert float(agree["why"]["kappa"]) == round(cohen_kappa_score(c1, c2), 4) == 0.5
    bad = tmp_path / "bad.csv"
    bad.write_text("item,pid,answer\n1,P1,x\n", encoding="utf-8")
    for path, needle in ((bad, "no column 'task'"), (tmp_path / "none.csv", "cannot be read")):
        with pytest.raises(StudyError) as err:
            export_study(log.path, tmp_path / "o2", coding=path)
        assert needle in one_line(err.value)
        assert not (tmp_path / "o2").exists()  # nothing written
