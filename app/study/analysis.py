"""``stateseer study-analyze``: per condition, the outcomes with intervals, and a mixed model.

Read from the long table of a study log (:func:`~stateseer.app.study.export.long_rows`):

``correct``  keyed answers right (0/1; checks and questionnaires left out)
``time_s``   seconds on a task (tasks about the model only: no questionnaire, check,
             consent or debriefing)
``<id>``     each questionnaire's score (``sus``, ``tlx``, ...: the task id, without the
             ``.P`` of a questionnaire asked after each block)

Per condition: the mean of the participants' own means with a 95 % t interval over
participants (participants, not tasks, are the independent units). The model: a linear
mixed model (statsmodels ``mixedlm``) ``outcome ~ C(condition) + position`` with a random
intercept per participant, fitted by REML; the condition effects are Wald estimates,
95 % intervals and p-values against the first condition (the reference). Where every
participant has one value of an outcome (a questionnaire asked once between subjects) the
model is ordinary least squares, ``outcome ~ C(condition)``. ``correct`` is modelled as a
linear probability (a difference in the share right). Participants who failed an
attention or comprehension check can be left out (``exclude_failed_checks``).

``analyze_study(db, out)`` writes ``OUT/analysis.json`` (keys in ``DESIGN.md``) and
``OUT/report.html``: one self-contained page (tables, and the plots as inline PNG),
every name from the study escaped.
"""

from __future__ import annotations

import base64
import html
import io
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.app.study.export import long_rows
from stateseer.app.study.instruments import NO_EXPLORER, QUESTIONNAIRES
from stateseer.app.study.spec import StudyError
from stateseer.app.study.store import connect_log
from stateseer.core.atomic import atomic_write_text

__all__ = ["analyze_rows", "analyze_study", "condition_effect", "per_condition"]


def _t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and 95 % t interval."""
    from scipy.stats import t

    v = np.asarray(values, float)
    mean = float(v.mean())
    if len(v) < 2:
        return mean, float("nan"), float("nan")
    half = float(t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return mean, mean - half, mean + half


def per_condition(rows: Sequence[dict[str, Any]], outcome: str,
                  conditions: Sequence[str],
                  bounds: tuple[float, float] = (-np.inf, np.inf)
                  ) -> dict[str, dict[str, Any]]:
    """Per condition: participants, observations, the mean of the participants' means and
    its 95 % interval, clipped to ``bounds`` (the values the outcome can take: a share of
    correct answers lies in [0, 1], whatever a t interval over two participants says).

    Examples
    --------
    >>> rows = [{"pid": p, "condition": c, "y": y} for p, c, y in
    ...         [("a", "x", 1.0), ("a", "x", 3.0), ("b", "x", 4.0), ("c", "z", 5.0)]]
    >>> per_condition(rows, "y", ["x", "z"])["x"]["mean"]
    3.0
    >>> two = [{"pid": p, "condition": "x", "y": y} for p, y in (("a", 1.0), ("b", 0.0))]
    >>> per_condition(two, "y", ["x"], (0.0, 1.0))["x"]["ci"]  # t gives -5.85 to 6.85
    [0.0, 1.0]
    """
    out = {}
    for c in conditions:
        by: dict[str, list[float]] = {}
        for r in rows:
            if r["condition"] == c and r.get(outcome) is not None:
                by.setdefault(r["pid"], []).append(float(r[outcome]))
        if not by:
            continue
        means = [float(np.mean(v)) for v in by.values()]
        mean, lo, hi = _t_interval(means)
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])  # nan stays nan
        out[c] = {"n_participants": len(by), "n": sum(map(len, by.values())),
                  "mean": round(mean, 4), "ci": [_round(lo), _round(hi)]}
    return out


def _round(x: float) -> float | None:
    return None if not np.isfinite(x) else round(float(x), 4)


def _sig(p: float) -> float | None:
    """A p-value to three significant digits (small ones stay readable: 1.2e-17)."""
    return None if not np.isfinite(p) else float(f"{float(p):.3g}")


def condition_effect(rows: Sequence[dict[str, Any]], outcome: str,
                     conditions: Sequence[str]) -> dict[str, Any] | None:
    """The mixed model of ``outcome`` (see the module notes); None with fewer than two
    conditions or too few participants to fit."""
    import pandas as pd
    import statsmodels.formula.api as smf

    data = pd.DataFrame([{"pid": r["pid"], "condition": r["condition"],
                          "position": float(r["position"]), "y": float(r[outcome])}
                         for r in rows if r.get(outcome) is not None
                         and r["condition"] in conditions])
    present = [c for c in conditions if c in set(data.get("condition", ()))]
    if len(present) < 2 or data["pid"].nunique() < 3:
        return None
    ref, label = present[0], outcome.removeprefix("score:")
    term = f"C(condition, Treatment(reference={ref!r}))"
    once = bool((data.groupby("pid").size() == 1).all())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter; the fit is reported
        if once:
            fit = smf.ols(f"y ~ {term}", data).fit()
            method, formula = "ols", f"{label} ~ condition"
        else:
            fit = smf.mixedlm(f"y ~ {term} + position", data, groups=data["pid"]).fit(
                reml=True)
            method, formula = "mixedlm", f"{label} ~ condition + position + (1 | participant)"
    ci = fit.conf_int()
    effects = {}
    for c in present[1:]:
        name = f"{term}[T.{c}]"
        effects[c] = {"estimate": _round(fit.params[name]),
                      "ci": [_round(ci.loc[name, 0]), _round(ci.loc[name, 1])],
                      "p_value": _sig(fit.pvalues[name])}
    first = effects[present[1]]
    return {"method": method, "formula": formula, "reference": ref,
            "n_participants": int(data["pid"].nunique()), "n": len(data),
            "effect": first["estimate"], "ci": first["ci"], "p_value": first["p_value"],
            "effects": effects}


def _outcomes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The outcome columns the rows hold (see the module notes), in report order."""
    names = []
    if any(r["correct"] is not None for r in rows):
        names.append("correct")
    if any(r["time_s"] is not None for r in rows):
        names.append("time_s")
    names += sorted({k for r in rows for k in r if k.startswith("score:")})
    return names


#: the scores an instrument gives, 0-100 (SUS and raw NASA-TLX)
SCORE_RANGES = {"sus": (0.0, 100.0), "nasa_tlx": (0.0, 100.0)}


def _bounds(long: Sequence[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """The values each outcome can take: a share of correct answers, a time, the scores
    of the instruments with a fixed range."""
    out = {"correct": (0.0, 1.0), "time_s": (0.0, np.inf)}
    for r in long:
        if r["answer_type"] in SCORE_RANGES:
            out[f"score:{str(r['task']).split('.')[0]}"] = SCORE_RANGES[r["answer_type"]]
    return out


def _analysis_rows(long: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The long rows as outcomes: ``correct`` and ``time_s`` for tasks about the model,
    ``score:ID`` for questionnaires."""
    out = []
    for r in long:
        kind = r["answer_type"]
        row = {"pid": r["pid"], "condition": r["condition"], "position": r["position"],
               "correct": None, "time_s": None}
        if kind in QUESTIONNAIRES:
            if r.get("score") is not None:
                row[f"score:{str(r['task']).split('.')[0]}"] = float(r["score"])
        elif kind not in NO_EXPLORER:
            row["time_s"] = None if r["timed_out"] else r["seconds"]
            if r["correct"] is not None:
                row["correct"] = 1.0 if r["correct"] else 0.0
        else:
            continue
        out.append(row)
    return out


def analyze_rows(long: Sequence[dict[str, Any]], *, design: str,
                 exclude_failed_checks: bool = False) -> dict[str, Any]:
    """The analysis (``analysis.json``) of the long rows of a study."""
    excluded = sorted({r["pid"] for r in long if r["failed_checks"]}) \
        if exclude_failed_checks else []
    long = [r for r in long if r["pid"] not in excluded]
    rows = _analysis_rows(long)
    conditions = list(dict.fromkeys(sorted(r["condition"] for r in rows)))
    outcomes = {}
    bounds = _bounds(long)
    for name in _outcomes(rows):
        key = name.removeprefix("score:")
        outcomes[key] = {"per_condition": per_condition(rows, name, conditions,
                                                        bounds.get(name, (-np.inf, np.inf))),
                         "model": condition_effect(rows, name, conditions)}
    return {"format": "stateseer.study-analysis", "version": 1,
            "n_participants": len({r["pid"] for r in long}), "conditions": conditions,
            "design": design, "excluded_failed_checks": excluded,
            "failed_checks": {r["pid"]: r["failed_checks"] for r in long
                              if r["failed_checks"]}, "outcomes": outcomes}


def analyze_study(db: str | Path, out: str | Path, *,
                  exclude_failed_checks: bool = False) -> dict[str, Any]:
    """Analyse the study log ``db``: ``OUT/analysis.json`` and ``OUT/report.html``.

    Raises
    ------
    StudyError
        Not a study log, or no submitted answers to analyse (one line each).
    """
    conn = connect_log(db)
    try:
        long = long_rows(conn)
        methods = {m for (m,) in conn.execute("SELECT DISTINCT method FROM participants")}
    finally:
        conn.close()
    if not long:
        raise StudyError(f"{db} holds no submitted answers yet — analyse it once "
                         "participants have answered")
    doc = analyze_rows(long, design="latin" if "latin" in methods else "between",
                       exclude_failed_checks=exclude_failed_checks)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise StudyError(f"--out {out} is a file — pass a folder")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "analysis.json", json.dumps(doc, indent=1))
    atomic_write_text(out / "report.html", report_html(doc))
    return doc


def _plot(name: str, per: dict[str, dict[str, Any]]) -> str:
    """The per-condition means and intervals as an inline PNG (a data URI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    conds = list(per)
    fig, ax = plt.subplots(figsize=(4, 0.5 + 0.45 * len(conds)), dpi=110)
    for k, c in enumerate(conds):
        lo, hi = per[c]["ci"]
        if lo is not None:
            ax.plot([lo, hi], [k, k], color="#1f4e79", lw=2)
        ax.plot(per[c]["mean"], k, "o", color="#1f4e79")
    ax.set_yticks(range(len(conds)), conds)
    ax.set_ylim(-0.6, len(conds) - 0.4)
    ax.set_xlabel(f"{name}: mean and 95 % interval")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An HTML table, every cell escaped."""
    def tr(cells: Sequence[Any], tag: str) -> str:
        return "<tr>" + "".join(f"<{tag}>{html.escape(str(c))}</{tag}>" for c in cells) + \
            "</tr>"
    return "<table>" + tr(head, "th") + "".join(tr(r, "td") for r in rows) + "</table>"


def report_html(doc: dict[str, Any]) -> str:
    """One self-contained HTML page of an analysis (every study name escaped)."""
    e = html.escape
    parts = [f"<h1>Study analysis</h1><p>{doc['n_participants']} participants · design "
             f"{e(doc['design'])} · conditions {e(', '.join(doc['conditions']))}</p>"]
    if doc["excluded_failed_checks"]:
        parts.append(f"<p>Left out for failed checks: "
                     f"{e(', '.join(doc['excluded_failed_checks']))}</p>")
    elif doc["failed_checks"]:
        parts.append(f"<p>{len(doc['failed_checks'])} participant(s) failed a check and "
                     "are included (study-analyze --exclude-failed-checks leaves them "
                     "out).</p>")
    for name, o in doc["outcomes"].items():
        per = o["per_condition"]
        parts.append(f"<h2>{e(name)}</h2>" + _table(
            ("condition", "participants", "values", "mean", "95 % interval"),
            [(c, v["n_participants"], v["n"], v["mean"], f"{v['ci'][0]} – {v['ci'][1]}")
             for c, v in per.items()])
            + f"<img alt='{e(name)} per condition' src='{_plot(name, per)}'>")
        m = o["model"]
        if m is None:
            parts.append("<p>No model: fewer than two conditions or three participants.</p>")
            continue
        parts.append(f"<p>{e(m['method'])}: <code>{e(m['formula'])}</code>, "
                     f"{m['n_participants']} participants, {m['n']} values</p>" + _table(
                         ("effect", "estimate", "95 % interval", "p"),
                         [(f"{c} − {m['reference']}", v["estimate"],
                           f"{v['ci'][0]} – {v['ci'][1]}", v["p_value"])
                          for c, v in m["effects"].items()]))
    style = ("body{font-family:sans-serif;max-width:52em;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
             "padding:3px 8px;text-align:left}h2{margin-top:1.6em}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Study analysis"
            f"</title><style>{style}</style></head><body>{''.join(parts)}</body></html>")
