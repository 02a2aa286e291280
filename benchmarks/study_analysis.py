"""Does ``stateseer study-analyze`` find a known effect, and only when there is one?

Simulated within-subject studies (:func:`stateseer.testing.simulated_study`: a Williams
order over ``full`` and ``baseline``, four keyed tasks per block, a SUS after each; time
on task with a participant random intercept, a learning effect between blocks and a
condition effect of Cohen's d) run through the study server's own code into a real study
log, which ``study-analyze`` then reads. Per d, over ``--studies`` studies of
``--participants`` participants:

``power`` / ``type1``  the share of studies whose model finds the time effect (p < 0.05),
                       at d = 0.8 and at d = 0 (targets: >= 0.80 and <= 0.075)
``coverage``           the share whose 95 % interval of the effect covers the true one
                       (target >= 0.90)
``correct_type1``      the same for correctness, on which the simulation puts no effect

Baselines on the same simulated logs: ``paired_t`` (participants' mean times per condition,
a paired t-test: the classical analysis, ignoring position) and ``pooled_ols`` (every
task time in one OLS, ignoring who answered: what a spreadsheet analysis does).

Usage: ``python benchmarks/study_analysis.py [--run RUN] [--studies 50] [--participants 28]
[--d 0,0.3,0.8]``. Last line: JSON with ``power``, ``type1``, ``coverage``,
``n_participants``, ``n_studies`` (DESIGN.md) and ``methods`` (each method's figures per d).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _baselines(db: Path, truth: float) -> dict[str, dict[str, float]]:
    """The paired t-test and pooled OLS of time on task (see the module notes)."""
    import statsmodels.formula.api as smf
    from scipy.stats import ttest_rel

    from stateseer.app.study.export import long_rows

    conn = sqlite3.connect(db)
    rows = [r for r in long_rows(conn) if r["answer_type"] == "choice"]
    conn.close()
    pids = sorted({r["pid"] for r in rows})
    mean = {(p, c): np.mean([r["seconds"] for r in rows if r["pid"] == p
                             and r["condition"] == c]) for p in pids
            for c in ("full", "baseline")}
    full = np.array([mean[p, "full"] for p in pids])
    base = np.array([mean[p, "baseline"] for p in pids])
    t = ttest_rel(full, base)
    ci = t.confidence_interval()
    import pandas as pd

    data = pd.DataFrame({"y": [r["seconds"] for r in rows],
                         "full": [r["condition"] == "full" for r in rows]})
    ols = smf.ols("y ~ full", data).fit()
    oci = ols.conf_int().loc["full[T.True]"]
    return {"paired_t": {"p": float(t.pvalue), "covers": bool(ci.low <= truth <= ci.high)},
            "pooled_ols": {"p": float(ols.pvalues["full[T.True]"]),
                           "covers": bool(oci[0] <= truth <= oci[1])}}


def run(context, d: float, studies: int, participants: int, work: Path) -> dict[str, dict]:
    """Every method's share of significant effects and of covering intervals at ``d``."""
    from stateseer.app.study.analysis import analyze_study
    from stateseer.testing import simulated_study

    found: dict[str, list[dict[str, float]]] = {"stateseer": [], "paired_t": [],
                                                "pooled_ols": []}
    wrong_correct = []
    t0 = time.perf_counter()
    for k in range(studies):
        db = work / f"d{d}-{k}.sqlite"
        truth = simulated_study(context, db, n_participants=participants, d=d,
                                seed=int(1000 * d) * 10_000 + k)
        doc = analyze_study(db, work / f"d{d}-{k}")
        model = doc["outcomes"]["time_s"]["model"]
        lo, hi = model["ci"]
        found["stateseer"].append({"p": model["p_value"], "covers": lo <= truth <= hi})
        wrong_correct.append(doc["outcomes"]["correct"]["model"]["p_value"] < 0.05)
        for name, res in _baselines(db, truth).items():
            found[name].append(res)
    out = {name: {"significant": round(float(np.mean([r["p"] < 0.05 for r in rs])), 3),
                  "coverage": round(float(np.mean([r["covers"] for r in rs])), 3)}
           for name, rs in found.items()}
    out["stateseer"]["correct_significant"] = round(float(np.mean(wrong_correct)), 3)
    out["stateseer"]["seconds_per_study"] = round((time.perf_counter() - t0) / studies, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", default="runs/rt", help="a recorded run (the tasks need one)")
    p.add_argument("--studies", type=int, default=50)
    p.add_argument("--participants", type=int, default=28)
    p.add_argument("--d", default="0,0.3,0.8", help="effect sizes (Cohen's d), comma-separated")
    args = p.parse_args(argv)
    from stateseer.app.explorer.context import ExplorerContext

    context = ExplorerContext.load(args.run)
    ds = [float(x) for x in args.d.split(",")]
    methods: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="stateseer-study-sim-") as tmp:
        for d in ds:
            res = run(context, d, args.studies, args.participants, Path(tmp))
            for name, figs in res.items():
                methods.setdefault(name, {})[str(d)] = figs
            print(f"d = {d}: " + "; ".join(f"{n} significant {f['significant']:.2f}, "
                                           f"coverage {f['coverage']:.2f}"
                                           for n, f in res.items()), file=sys.stderr)
    mine = methods["stateseer"]
    print(json.dumps({"power": mine.get("0.8", {}).get("significant"),
                      "type1": mine.get("0.0", {}).get("significant"),
                      "coverage": round(float(np.mean([f["coverage"] for f in mine.values()])),
                                        3),
                      "correct_type1": round(float(np.mean(
                          [f["correct_significant"] for f in mine.values()])), 3),
                      "n_participants": args.participants, "n_studies": args.studies,
                      "methods": methods}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
