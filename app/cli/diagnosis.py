"""Why a model errs and what to do about it: ``diagnose`` and ``repair``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from stateseer.app.cli.options import (
    SPLITS,
    _check_out_dir,
    _note,
    _positive_int,
    _progress_writer,
    _seed,
)


def _cmd_diagnose(args: argparse.Namespace) -> int:
    from stateseer.app.workflows.diagnose import diagnose_run, findings_table
    from stateseer.app.workflows.retraining import training_settings
    from stateseer.rnn_models.run import ModelRun

    doc = diagnose_run(args.run, split=args.split, top=args.top,
                       min_support=args.min_support, log=_note)
    print(findings_table(doc, args.run,
                         repairable=training_settings(ModelRun(args.run)) is not None))
    print(json.dumps({"findings": f"{args.run}/diagnosis/findings.json",
                      "significant": doc["n_significant"], "seconds": doc["seconds"]}))
    return 0


def _cmd_repair(args: argparse.Namespace) -> int:
    from stateseer.app.workflows.repair import repair_run

    _check_out_dir(args.out)
    report = _progress_writer(args.progress_json)
    doc = repair_run(args.run, finding=args.finding, action=args.action, out=args.out,
                     seed=args.seed, progress=not args.quiet, log=_note, report=report,
                     control=args.control, seeds=args.seeds, force=args.force,
                     oracle=args.oracle)
    print(json.dumps({k: doc[k] for k in ("before", "after", "delta", "delta_ci",
                                          "per_class_delta", "carriers", "finding_gone",
                                          "finding_left", "control",
                                          "seeds", "oracle", "gap_closed")
                      if k in doc}))
    return 0


def _seeds(text: str) -> int:
    from stateseer.app.workflows.repair import MAX_SEEDS

    n = _positive_int(text)
    if n > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"at most {MAX_SEEDS} (each seed trains two models)")
    return n


def _add_diagnose(sub: Any) -> None:
    d = sub.add_parser("diagnose", help="why the model errs: findings (tokens, sequences, "
                       "unknown words, length), each checked by intervening with the model")
    d.add_argument("run", help="run directory (recorded)")
    d.add_argument("--split", choices=SPLITS, default="test",
                   help="where the errors are counted")
    d.add_argument("--top", type=_positive_int, default=10, help="findings kept")
    d.add_argument("--min-support", type=_positive_int, default=5,
                   help="inputs a culprit must be carried by")
    d.set_defaults(func=_cmd_diagnose)

    from stateseer.app.workflows.repair import ACTIONS

    r = sub.add_parser("repair", help="act on a finding: edit the training data, retrain "
                       "into a new run, and compare the two")
    r.add_argument("run", help="a diagnosed run (`stateseer diagnose`)")
    r.add_argument("--finding", type=_positive_int, required=True,
                   help="the finding's rank in RUN/diagnosis/findings.json")
    r.add_argument("--action", required=True, choices=ACTIONS,
                   help="how to edit the training inputs that carry the culprit, or "
                   "the training settings (reweight: the labels read through the noise "
                   "measured; reconfigure: a pipeline setting); the finding's actions, "
                   "the fittest first, are in findings.json")
    r.add_argument("--out", required=True, help="the new run directory (built beside it "
                   "as OUT.tmp and renamed into place when whole)")
    r.add_argument("--force", action="store_true", help="replace a run already at --out "
                   "(only once the repair is whole)")
    r.add_argument("--seed", type=_seed, default=0,
                   help="seed of what the repair draws (the confusion suspects' folds, "
                   "augment's copies, the control's 1%%); not the training seed, which "
                   "stays RUN's")
    r.add_argument("--control", action="store_true",
                   help="also train RUN's own data less a random 1%% of its training "
                   "inputs (OUT/control): how far retraining alone moves the accuracy and "
                   "single classes, to read the repair's change against")
    r.add_argument("--seeds", type=_seeds, default=1, metavar="N",
                   help="also train RUN's data and the edited data with N-1 more seeds each "
                   "and report the mean change with a 95%% interval over the seeds, and "
                   "per class: one training's change holds that training's luck (N "
                   "times the training time; default: 1, the repair alone)")
    r.add_argument("--oracle", metavar="RUN", default=None,
                   help="a run trained on the data before the bug (a known-good model): "
                   "repair.json gets its accuracy on RUN's test inputs and the share of "
                   "the gap the repair closes (default: none)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--progress-json", metavar="FILE", help="keep FILE up to date with the "
                   "work's stage as JSON ({stage, done, total}), for a tool that shows it "
                   "(default: none)")
    r.set_defaults(func=_cmd_repair)
