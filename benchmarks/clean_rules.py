"""False findings on clean models under three rule sets, on the same trained models.

``benchmarks/bugs.py --recipes "" --out DIR`` trains and keeps clean controls (models
trained on data without a planted bug). This script re-diagnoses every kept clean model
(``DIR/<partition>/<data set>-<seed>/clean/run``) under three sets of
:mod:`stateseer.app.workflows.diagnose`'s least-effect rules, so that the rules alone
differ:

``stop55``       none of them (round 4's first report run);
``first_rules``  a class-share candidate's error lift (``SHARE_ERROR_LIFT``), a
                 confusion's replication on the other held-out split
                 (``REPLICATION_ALPHA``), a shortcut's training lean (``SHORTCUT_ODDS``)
                 and the least errors (``MIN_ERRORS``);
``current``      those and the prior shift's odds (``PRIOR_ODDS``): what ships.

Prints one line per model to stderr and, last, one JSON object: ``rule_sets``, ``runs``
(per model: ``run`` and each rule set's significant findings) and ``summary`` (per rule
set: models with a significant finding, of how many).

Usage: ``python benchmarks/clean_rules.py DIR [DIR ...]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import stateseer.abstraction.analysis.diagnosis as A
import stateseer.app.workflows.diagnose as D

ROOT = Path(__file__).resolve().parents[1]
CURRENT = {"SHARE_ERROR_LIFT": A.SHARE_ERROR_LIFT, "REPLICATION_ALPHA": D.REPLICATION_ALPHA,
           "SHORTCUT_ODDS": D.SHORTCUT_ODDS, "MIN_ERRORS": D.MIN_ERRORS,
           "PRIOR_ODDS": D.PRIOR_ODDS}
RULE_SETS = {
    "stop55": {"SHARE_ERROR_LIFT": 1.0, "REPLICATION_ALPHA": 1.01, "SHORTCUT_ODDS": 0.0,
               "MIN_ERRORS": 0, "PRIOR_ODDS": 0.0},
    "first_rules": {**CURRENT, "PRIOR_ODDS": 0.0},
    "current": CURRENT,
}


def use(rules: dict[str, float]) -> None:
    """Set the rules (module constants read at diagnosis time)."""
    A.SHARE_ERROR_LIFT = rules["SHARE_ERROR_LIFT"]
    for name in ("REPLICATION_ALPHA", "SHORTCUT_ODDS", "MIN_ERRORS", "PRIOR_ODDS"):
        setattr(D, name, rules[name])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dirs", nargs="+", type=Path, help="bugs.py --out directories")
    args = p.parse_args(argv)
    runs = sorted(r for d in args.dirs for r in d.glob("*/*/clean/run"))
    if not runs:
        sys.exit(f"no clean models under {', '.join(map(str, args.dirs))}; keep them with "
                 "`benchmarks/bugs.py --recipes \"\" --out DIR`")
    rows = []
    for run in runs:
        row: dict = {"run": f"{run.parents[2].name}/{run.parents[1].name}"}
        for name, rules in RULE_SETS.items():
            use(rules)
            doc = D.diagnose_run(run, top=10, save=False)
            row[name] = [f["description"] for f in doc["findings"] if f["significant"]]
        rows.append(row)
        print(row["run"], *(len(row[k]) for k in RULE_SETS), file=sys.stderr)
    use(CURRENT)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or None
    print(json.dumps({"rule_sets": RULE_SETS, "runs": rows, "commit": commit,
                      "summary": {k: {"with_significant": sum(bool(r[k]) for r in rows),
                                      "runs": len(rows)} for k in RULE_SETS}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
