"""User studies: ``study``, ``study-export``, ``study-analyze`` and ``study-template``."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from stateseer.app.cli.options import _add_host_port, _check_bind, _check_out_dir, _check_out_file


def _cmd_study(args: argparse.Namespace) -> int:
    from stateseer.app.study.server import serve_study

    token = args.admin_token or os.environ.get("STATESEER_ADMIN_TOKEN") or None
    _check_bind(args.host, "the study server" + (" (and its admin token)" if token else ""))
    return serve_study(args.study_file, db=args.db, run=args.run, host=args.host,
                       port=args.port, admin_token=token, access_log=args.access_log,
                       allowed_hosts=args.allowed_hosts, bind_warned=True)  # warned once


def _cmd_study_export(args: argparse.Namespace) -> int:
    from stateseer.app.study.export import export_study

    _check_out_dir(args.out)
    print(json.dumps({"written": export_study(args.db, args.out, args.format,
                                              coding=args.coding, long=args.long)}))
    return 0


def _cmd_study_analyze(args: argparse.Namespace) -> int:
    from stateseer.app.study.analysis import analyze_study

    _check_out_dir(args.out)
    doc = analyze_study(args.db, args.out, exclude_failed_checks=args.exclude_failed_checks)
    for name, o in doc["outcomes"].items():
        m = o["model"]
        means = ", ".join(f"{c} {v['mean']:.3g} [{v['ci'][0]}, {v['ci'][1]}]"
                          for c, v in o["per_condition"].items())
        effect = (f"; {m['method']}: {m['effect']:+.3g} [{m['ci'][0]}, {m['ci'][1]}], "
                  f"p = {m['p_value']:.3g}") if m else ""
        print(f"{name}: {means}{effect}")
    print(json.dumps({"written": [str(Path(args.out) / "analysis.json"),
                                  str(Path(args.out) / "report.html")]}))
    return 0


def _cmd_study_template(args: argparse.Namespace) -> int:
    from stateseer.app.study.replication import deepseer_study
    from stateseer.app.study.spec import parse_study

    _check_out_file(args.out, args.force)
    out = Path(args.out)
    doc = deepseer_study(args.run, per_block=args.per_block, seed=args.seed)
    # the run as the study file reads it: relative to the file's folder
    doc["run"] = os.path.relpath(Path(args.run).resolve(), out.resolve().parent)
    parse_study(doc, base=out.resolve().parent)  # what is written is a valid study
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n = sum(t["id"].startswith("understand-") for t in doc["tasks"])
    print(f"{out}: {n} misclassified inputs in two blocks, SUS and NASA-TLX after each; "
          f"run it with `stateseer study {out}`")
    return 0


def _add_study(sub: Any) -> None:
    st = sub.add_parser("study", help="serve a user study: participants, conditions, tasks "
                        "and an interaction log")
    st.add_argument("study_file", help="the study file (JSON, or YAML with PyYAML)")
    st.add_argument("--run", help="run directory to show (default: the study file's 'run')")
    st.add_argument("--db", help="SQLite interaction log (default: study-ID.sqlite here)")
    _add_host_port(st)
    st.add_argument("--admin-token", help="turn the admin page on (/study/admin) with this "
                    "token (or set $STATESEER_ADMIN_TOKEN; default: off)")
    st.add_argument("--access-log", action="store_true", help="print every HTTP request")
    st.set_defaults(func=_cmd_study)

    se = sub.add_parser("study-export", help="a study's interaction log as CSV/Parquet tables")
    se.add_argument("db", help="the SQLite log written by `stateseer study`")
    se.add_argument("--out", required=True, help="folder for events, answers and summary")
    se.add_argument("--format", choices=("csv", "parquet"), default="csv",
                    help="table format")
    se.add_argument("--coding", default=None,
                    help="coding.csv filled in by two coders: their agreement (Cohen's "
                    "kappa) to coding_agreement.csv; default: none, coding.csv is written "
                    "empty")
    se.add_argument("--long", action="store_true",
                    help="also `long`: one row per participant and task (condition, order, "
                    "block, position, time, grade, score, failed checks)")
    se.set_defaults(func=_cmd_study_export)

    sa = sub.add_parser("study-analyze", help="per condition outcomes with intervals, and a "
                        "mixed model of the condition effect")
    sa.add_argument("db", help="the SQLite log written by `stateseer study`")
    sa.add_argument("--out", required=True, help="folder for analysis.json and report.html")
    sa.add_argument("--exclude-failed-checks", action="store_true",
                    help="leave out participants who failed an attention or comprehension "
                    "check")
    sa.set_defaults(func=_cmd_study_analyze)

    tp = sub.add_parser("study-template", help="a DeepSeer replication study file for a run "
                        "(full explorer against the LIME-like baseline, within subject)")
    tp.add_argument("run", help="a recorded run")
    tp.add_argument("--out", required=True, help="the study file to write (JSON)")
    tp.add_argument("--per-block", type=int, default=2,
                    help="misclassified inputs per block (each: a keyed understanding "
                    "task and an open root-cause task)")
    tp.add_argument("--seed", type=int, default=0, help="seed of the answer options")
    tp.add_argument("--force", action="store_true", help="overwrite --out")
    tp.set_defaults(func=_cmd_study_template)
