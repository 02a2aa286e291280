"""The study log as tables: events, answers and a summary per participant and task.

``stateseer study-export DB --out DIR [--format csv|parquet] [--coding FILLED.csv] [--long]``
writes ``events``, ``answers`` (with ``correct``, ``precision`` and ``recall`` where the
task has a key, ``score`` for a questionnaire), ``summary`` and, with ``--long``, ``long``
(one row per participant and task, as an analysis reads it); and ``coding.csv``: the open
answers for two coders, without their condition. Given back filled in (``--coding``), the
coders' agreement per task (Cohen's kappa beside the chance agreement) goes to
``coding_agreement.csv``. The admin page serves the same tables as CSV. CSV cells that a
spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, tab, CR at the start) get
a leading ``'`` (:mod:`stateseer.core.csvsafe`); Parquet keeps the values as
stored. Participant link secrets are never exported (only :func:`links_csv`, for the
researcher).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from stateseer.app.study.identity import link_path
from stateseer.app.study.instruments import CHECKS
from stateseer.app.study.spec import ORDER_SEP, StudyError
from stateseer.app.study.store import connect_log
from stateseer.core.csvsafe import rows_to_csv

__all__ = ["ANSWER_COLUMNS", "CODING_COLUMNS", "EVENT_COLUMNS", "LONG_COLUMNS",
           "SUMMARY_COLUMNS", "answer_rows", "coding_agreement", "coding_rows", "event_rows",
           "export_study", "links_csv", "long_rows", "participant_rows", "summary_rows",
           "to_csv"]

EVENT_COLUMNS = ("id", "ts", "pid", "condition", "task", "kind", "source", "payload")
ANSWER_COLUMNS = ("pid", "condition", "position", "task", "started_at", "submitted_at",
                  "seconds", "timed_out", "answer_type", "answer", "correct", "precision",
                  "recall", "score")
SUMMARY_COLUMNS = ("pid", "condition", "position", "task", "status", "seconds",
                   "n_events", "timed_out", "answer")
LONG_COLUMNS = ("pid", "condition", "order", "block", "position", "task", "answer_type",
                "seconds", "timed_out", "correct", "precision", "recall", "score",
                "failed_checks")
CODING_COLUMNS = ("item", "pid", "task", "answer", "code_1", "code_2")
AGREEMENT_COLUMNS = ("task", "n_coded", "agreement", "chance_agreement", "kappa")
PARTICIPANT_COLUMNS = ("pid", "condition", "method", "joined_at", "tasks_done",
                       "tasks_started", "last_event")


def _answer_text(raw: str | None) -> tuple[str, str]:
    """(type, readable value) of a stored answer."""
    if not raw:
        return "", ""
    doc = json.loads(raw)
    value = doc.get("value")
    if isinstance(value, list):
        value = " ".join(map(str, value))
    return str(doc.get("type", "")), "" if value is None else str(value)


def _condition_sql(conn: sqlite3.Connection) -> str:
    """The condition a task was shown in: its block's (within-subject), else the
    participant's (also for logs written before tasks kept a condition)."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(tasks)")}
    return "COALESCE(t.condition, p.condition)" if "condition" in cols else "p.condition"


def event_rows(conn: sqlite3.Connection, pid: str | None = None) -> list[dict[str, Any]]:
    """Every event in order (of one participant if ``pid``)."""
    sql = f"SELECT {', '.join(EVENT_COLUMNS)} FROM events"
    rows = conn.execute(sql + (" WHERE pid = ? ORDER BY id" if pid else " ORDER BY id"),
                        (pid,) if pid else ()).fetchall()
    return [dict(zip(EVENT_COLUMNS, r, strict=True)) for r in rows]


def answer_rows(conn: sqlite3.Connection, pid: str | None = None) -> list[dict[str, Any]]:
    """Every submitted answer, by participant and task position."""
    rows = conn.execute(
        f"SELECT t.pid, {_condition_sql(conn)}, t.position, t.task, t.started_at, "
        "t.submitted_at, "
        "t.seconds, t.timed_out, t.answer FROM tasks t JOIN participants p USING (pid) "
        "WHERE t.submitted_at IS NOT NULL" + (" AND t.pid = ?" if pid else "")
        + " ORDER BY t.pid, t.position", (pid,) if pid else ()).fetchall()
    out = []
    for r in rows:
        kind, value = _answer_text(r[8])
        doc = json.loads(r[8]) if r[8] else {}
        g = doc.get("grade") or {}
        out.append(dict(zip(ANSWER_COLUMNS, (*r[:7], bool(r[7]), kind, value,
                                             g.get("correct"), g.get("precision"),
                                             g.get("recall"), doc.get("score")),
                            strict=True)))
    return out


def long_rows(conn: sqlite3.Connection, answers: list[dict[str, Any]] | None = None
              ) -> list[dict[str, Any]]:
    """One row per participant and submitted task, as an analysis reads it (long format):
    the task's condition, the participant's ``order`` of conditions and the ``block``
    (0-based: where the condition stands in that order; 0 between subjects), the task's
    position, time on task, grade and questionnaire score, and the participant's failed
    attention and comprehension checks. ``answers``: :func:`answer_rows`, when already
    read."""
    answers = answer_rows(conn) if answers is None else answers
    order = dict(conn.execute("SELECT pid, condition FROM participants").fetchall())
    failed: dict[str, int] = {}
    for a in answers:
        if a["answer_type"] in CHECKS and a["correct"] is False:
            failed[a["pid"]] = failed.get(a["pid"], 0) + 1
    out = []
    for a in answers:
        seq = order.get(a["pid"], "").split(ORDER_SEP)
        out.append({**{k: a[k] for k in LONG_COLUMNS if k in a},
                    "order": order.get(a["pid"], ""),
                    "block": seq.index(a["condition"]) if a["condition"] in seq else 0,
                    "failed_checks": failed.get(a["pid"], 0)})
    return out


def coding_rows(conn: sqlite3.Connection, answers: list[dict[str, Any]] | None = None
                ) -> list[dict[str, Any]]:
    """The open (text) answers for two coders: no condition (coders stay blind to it),
    in an order that groups by task but not by participant or condition (a hash of
    participant and task), ``code_1`` and ``code_2`` left empty to fill in. ``answers``:
    :func:`answer_rows`, when already read."""
    import hashlib

    rows = [a for a in (answer_rows(conn) if answers is None else answers)
            if a["answer_type"] == "text"]
    rows.sort(key=lambda a: (a["task"], hashlib.sha256(
        f"{a['pid']}/{a['task']}".encode()).hexdigest()))
    return [{"item": k, "pid": a["pid"], "task": a["task"], "answer": a["answer"],
             "code_1": "", "code_2": ""} for k, a in enumerate(rows, 1)]


def coding_agreement(path: str | Path) -> list[dict[str, Any]]:
    """Agreement of the two coders of a filled ``coding.csv``, per task and overall
    (task ``*``): items both coded, observed agreement, the agreement expected by chance
    from each coder's code frequencies, and Cohen's kappa (None when chance agreement
    is 1: one code for everything).

    Raises
    ------
    StudyError
        The file is missing, is not CSV, or lacks the columns ``task``, ``code_1`` and
        ``code_2``.
    """
    import csv

    import numpy as np

    path = Path(path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise StudyError(f"the coding file {path} cannot be read ({exc}) — pass the "
                         "coding.csv that study-export wrote, filled in") from None
    missing = [c for c in ("task", "code_1", "code_2") if rows and c not in rows[0]]
    if not rows or missing:
        raise StudyError(f"the coding file {path} has no "
                         f"{'rows' if not rows else 'column ' + repr(missing[0])} — pass "
                         "the coding.csv that study-export wrote, with both coders' codes")
    coded = [(r["task"], r["code_1"].strip(), r["code_2"].strip()) for r in rows
             if r["code_1"].strip() and r["code_2"].strip()]
    out = []
    for task in [*sorted({t for t, _, _ in coded}), "*"]:
        mine = [(a, b) for t, a, b in coded if task in ("*", t)]
        if not mine:
            continue
        a, b = (np.array(x) for x in zip(*mine, strict=True))
        labels = sorted(set(a) | set(b))
        pa = np.array([(a == c).mean() for c in labels])
        pb = np.array([(b == c).mean() for c in labels])
        po, pe = float((a == b).mean()), float(pa @ pb)
        out.append({"task": task, "n_coded": len(mine), "agreement": round(po, 4),
                    "chance_agreement": round(pe, 4),
                    "kappa": round((po - pe) / (1 - pe), 4) if pe < 1 else None})
    return out


def summary_rows(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """One row per participant and started task: status, time on task, events, answer."""
    n_events = {(p, t): n for p, t, n in conn.execute(
        "SELECT pid, task, COUNT(*) FROM events GROUP BY pid, task").fetchall()}
    rows = conn.execute(
        f"SELECT t.pid, {_condition_sql(conn)}, t.position, t.task, t.submitted_at, "
        "t.seconds, "
        "t.timed_out, t.answer FROM tasks t JOIN participants p USING (pid) "
        "ORDER BY p.ordinal, t.position").fetchall()
    out = []
    for pid, cond, pos, task, sub, secs, tout, ans in rows:
        out.append({"pid": pid, "condition": cond, "position": pos, "task": task,
                    "status": "done" if sub else "in progress", "seconds": secs,
                    "n_events": n_events.get((pid, task), 0), "timed_out": bool(tout),
                    "answer": _answer_text(ans)[1]})
    return out


def participant_rows(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """One row per participant: condition, tasks done and started, last event time."""
    rows = conn.execute(
        "SELECT p.pid, p.condition, p.method, p.joined_at, "
        "(SELECT COUNT(*) FROM tasks t WHERE t.pid = p.pid AND t.submitted_at IS NOT NULL), "
        "(SELECT COUNT(*) FROM tasks t WHERE t.pid = p.pid), "
        "(SELECT MAX(ts) FROM events e WHERE e.pid = p.pid) "
        "FROM participants p ORDER BY p.ordinal").fetchall()
    return [dict(zip(PARTICIPANT_COLUMNS, r, strict=True)) for r in rows]


def to_csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """Rows as CSV text with a header (quoted where needed, formulas escaped)."""
    return rows_to_csv(rows, columns)


def links_csv(links: list[dict[str, Any]], base_url: str = "") -> str:
    """Participant links (:meth:`StudyLog.links`) as CSV: ``pid, condition, link``."""
    rows = [{"pid": r["pid"], "condition": r.get("condition") or "",
             "link": base_url.rstrip("/") + link_path(r["secret"])} for r in links]
    return to_csv(rows, ("pid", "condition", "link"))


def _write_parquet(rows: list[dict[str, Any]], columns: tuple[str, ...], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: [r.get(c) for r in rows] for c in columns})
    pq.write_table(table, path)


def export_study(db: str | Path, out: str | Path, fmt: str = "csv",
                 coding: str | Path | None = None, long: bool = False) -> dict[str, str]:
    """Write ``events``, ``answers`` and ``summary`` of the study log ``db`` into ``out``,
    and ``coding.csv``: the open answers for two coders (:func:`coding_rows`).

    Parameters
    ----------
    db : str or Path
        A database written by ``stateseer study``.
    out : str or Path
        Folder to write into (created if missing).
    fmt : {"csv", "parquet"}
        Parquet needs pyarrow.
    coding : str or Path, optional
        A ``coding.csv`` both coders filled in: their agreement (Cohen's kappa beside
        chance agreement, :func:`coding_agreement`) is written to
        ``coding_agreement.csv``.
    long : bool
        Also ``long``: one row per participant and task (:func:`long_rows`).

    Returns
    -------
    dict of str to str
        Table name to the path written.
    """
    if fmt not in ("csv", "parquet"):
        raise StudyError(f"unknown export format {fmt!r} — use csv or parquet")
    if fmt == "parquet":
        try:
            import pyarrow
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise StudyError("--format parquet needs pyarrow, which is not installed — "
                             "pip install pyarrow, or use --format csv") from None
    agreement = coding_agreement(coding) if coding is not None else None
    conn = connect_log(db)
    try:
        answers = answer_rows(conn)  # read once: the long table and the coding use it too
        tables = {"events": (event_rows(conn), EVENT_COLUMNS),
                  "answers": (answers, ANSWER_COLUMNS),
                  "summary": (summary_rows(conn), SUMMARY_COLUMNS)}
        if long:
            tables["long"] = (long_rows(conn, answers), LONG_COLUMNS)
        texts = {"coding": (coding_rows(conn, answers), CODING_COLUMNS)}
    finally:
        conn.close()
    if agreement is not None:
        texts["coding_agreement"] = (agreement, AGREEMENT_COLUMNS)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise StudyError(f"--out {out} is a file — pass a folder")
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, (rows, cols) in tables.items():
        path = out / f"{name}.{fmt}"
        if fmt == "csv":
            path.write_text(to_csv(rows, cols), encoding="utf-8", newline="")
        else:
            _write_parquet(rows, cols, path)
        written[name] = str(path)
    for name, (rows, cols) in texts.items():  # edited by hand: CSV whatever the format
        path = out / f"{name}.csv"
        if name == "coding" and coding is not None and path.resolve() == \
                Path(coding).resolve():
            continue  # the coders' filled file is never overwritten with empty codes
        path.write_text(to_csv(rows, cols), encoding="utf-8", newline="")
        written[name] = str(path)
    return written
