"""Commands over a recorded run's states: ``abstract``, ``sweep``, ``force``, ``compare``,
``index``, ``extract-dfa`` and ``export``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from stateseer.app.cli.options import (
    FALLBACKS,
    FEATURES,
    FORMATS,
    METHODS,
    SPLITS,
    _add_cluster,
    _add_renamed,
    _check_out_dir,
    _check_out_file,
    _fraction,
    _int,
    _nonnegative_int,
    _note,
    _positive_float,
    _positive_int,
    _progress_writer,
    _seed,
    _states_arg,
    _states_list,
)
from stateseer.core import layout
from stateseer.core.defaults import AUTO_CAP, N_STATES
from stateseer.core.errors import StateseerError


def _abstraction_params(args: argparse.Namespace) -> dict[str, Any]:
    return {"method": args.method, "pca": args.pca, "features": args.features,
            "fallback": args.fallback, "simulation": args.simulation,
            "split_by_prediction": not args.no_split_by_prediction, "random_state": args.seed}


def _cmd_abstract(args: argparse.Namespace) -> int:
    from stateseer.app.workflows.abstract import abstract_workflow

    out = abstract_workflow(args.run, n_states=args.states, cap=args.auto_cap,
                            layer=args.layer, forcing=not args.no_forcing,
                            index=not args.no_index, cluster=args.cluster, log=_note,
                            **_abstraction_params(args))
    print(json.dumps(out))
    return 0


def _forcing(run: str, split: str | None = None, cluster: Any = None) -> dict:
    from stateseer.app.workflows.forcing import measure_forcing

    return measure_forcing(run, split=split, cluster=cluster)


def _index(run: str, cluster: Any = None) -> None:
    from stateseer.app.workflows.contexts import context_index
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    r = ModelRun(run)
    context_index(r, Traces(r.traces_dir), cluster=cluster)


def _cmd_force(args: argparse.Namespace) -> int:
    figs = _forcing(args.run, args.split, args.cluster)
    per = figs["forcing"].get("per_state", {})
    worst = sorted(per.items(), key=lambda kv: kv[1]["agreement"])[:5]
    print(json.dumps({"forcing_agreement": figs["forcing_agreement"],
                      "split": figs["forcing"].get("split", args.split),
                      "n_inputs": figs["forcing"]["n_inputs"],
                      "least_faithful_states": dict(worst),
                      "seconds": figs["forcing"]["seconds"]}))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from stateseer.app.workflows.comparison import compare_runs

    if args.out:
        _check_out_file(args.out, args.force)
    print(json.dumps(compare_runs(args.run, args.other, args.split, out=args.out)))
    return 0


def _cmd_index(args: argparse.Namespace) -> int:
    import time

    t0 = time.perf_counter()
    _index(args.run, args.cluster)
    print(json.dumps({"index": f"{args.run}/index/train.contexts.npz",
                      "seconds": round(time.perf_counter() - t0, 2)}))
    return 0


def _cmd_extract_dfa(args: argparse.Namespace) -> int:
    from stateseer.app.workflows.dfa import extract_run_dfa

    dfa = extract_run_dfa(args.run, max_states=args.max_states, random_state=args.seed,
                          examples=args.examples, states=args.merge_to, method=args.method,
                          seconds=args.seconds, algorithm=args.algorithm,
                          epsilon=args.epsilon, tests_on=args.tests_on,
                          mutants=args.mutants)
    keys = ("method", "n_states", "n_states_before_minimisation", "seconds",
            "budget_exhausted", "membership_queries", "rounds", "agreement",
            "heldout_error", "majority_error", "agreement_le12", "grammar_agreement_le12",
            "minimal_size_match", "examples", "off_data")
    if dfa.report.get("budget_exhausted"):
        _note(budget_note(dfa.report))
    if note := off_data_note(dfa.report):
        _note(note)
    print(json.dumps({k: dfa.report.get(k) for k in keys if k in dfa.report}))
    return 0


def off_data_note(report: dict[str, Any]) -> str | None:
    """The line ``extract-dfa`` adds when the automaton errs more often than always
    answering the majority class on random words of the data's lengths (active
    extraction's ``off_data`` check), else None.

    >>> off_data_note({"off_data": {"n_words": 1000, "error": 0.49,
    ...                             "majority_error": 0.09}})[:58]
    'off the data the automaton is worse than always answering '
    >>> off_data_note({"off_data": {"n_words": 1000, "error": 0.0, "majority_error": 0.3}})
    """
    off = report.get("off_data") or {}
    if not off or off["error"] <= off["majority_error"]:
        return None
    return (f"off the data the automaton is worse than always answering the majority class: "
            f"it errs on {off['error']:.1%} of {off['n_words']:,} random words of the data's "
            f"lengths (the majority on {off['majority_error']:.1%}); trust it on inputs like "
            "the data only, or raise --max-states/--seconds")


def budget_note(report: dict[str, Any]) -> str:
    """The one line ``extract-dfa`` adds when its budget ran out: the automaton is an
    approximation, how close, and what to do.

    >>> budget_note({"n_states": 191, "agreement": 0.714})[:62]
    'the budget ran out at 191 states: the automaton approximates t'
    """
    close = next((f"{name} {report[key]:.3f}" for key, name in (
        ("agreement", "agreement with the model on held-out prefixes"),
        ("heldout_error", "held-out error")) if isinstance(report.get(key), float)), None)
    return (f"the budget ran out at {report.get('n_states')} states: the automaton "
            f"approximates the model{f' ({close})' if close else ''}; raise --max-states "
            "or --seconds, or, for text rather than a formal language, read the FSM "
            "(`stateseer export RUN --format svg`)")


def _cmd_export(args: argparse.Namespace) -> int:
    from stateseer.app.workflows.exports import export_run

    if str(args.out) != "-":  # before any work, in the CLI's words (--force)
        _check_out_file(args.out, force=args.force)
    if args.input is not None and args.format != "html":
        raise StateseerError("--input is for --format html (one input's trace as a page); "
                             "drop it or use --format html")
    path = export_run(args.run, args.format, args.out, dfa=args.dfa, top_k=args.top_k,
                      min_count=args.min_count, overwrite=args.force, log=_note,
                      input_id=args.input, split=args.split)
    print(json.dumps({"written": str(path), "format": args.format}),
          file=sys.stderr if str(args.out) == "-" else sys.stdout)
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from stateseer.app.workflows.sweep import sweep_run, sweep_table, write_sweep

    out = _check_out_dir(args.out or layout.RunLayout(args.run).sweep)
    from stateseer.app.workflows.abstract import imported_params

    points = sweep_run(args.run, args.candidates, split=args.split, forcing=not args.no_forcing,
                       log=lambda msg: print(f"stateseer sweep: {msg}", file=sys.stderr),
                       report=_progress_writer(args.progress_json),
                       **imported_params(args.run, _abstraction_params(args), _note))
    written = write_sweep(points, out)
    print(sweep_table(points))
    if written["png"] is None:
        print("stateseer: note: sweep.png skipped (matplotlib is not installed)",
              file=sys.stderr)
    print(json.dumps({"written": written, "split": args.split or _measured_split(args.run)}))
    return 0


def _measured_split(run: str) -> str:
    from stateseer.core.traces import Traces

    return Traces(layout.RunLayout(run).traces).measured_split


def _add_abstraction_options(a: argparse.ArgumentParser) -> None:
    a.add_argument("--method", choices=METHODS, default="kmeans", metavar="METHOD",
                   help="clustering: %(choices)s")
    a.add_argument("--features", choices=FEATURES, default="margin", metavar="SPACE",
                   help="space the states are clustered in, one of: %(choices)s (margin: the "
                   "classifier's logit margins; pca: DeepSeer's)")
    a.add_argument("--pca", type=_positive_int, default=20,
                   help="PCA components (with --features pca)")
    a.add_argument("--fallback", choices=FALLBACKS, default="displacement", metavar="RULE",
                   help="FSM simulation rule for unseen (state, token) pairs: %(choices)s")
    a.add_argument("--simulation", choices=("probabilistic", "argmax"),
                   default="probabilistic",
                   help="how the FSM alone predicts: track a distribution over states "
                   "(probabilistic) or follow the single most frequent path (argmax)")
    a.add_argument("--no-split-by-prediction", action="store_true",
                   help="let states mix hidden states of different predicted classes")
    a.add_argument("--seed", type=_seed, default=0, help="random seed of the clustering")


def _add_abstract(sub: Any) -> None:
    a = sub.add_parser("abstract", help="cluster hidden states into abstract states and an FSM")
    a.add_argument("run", help="run directory")
    a.add_argument("--states", type=_states_arg, default=N_STATES,
                   help="abstract states (the FSM adds the initial state), or 'auto': the "
                   "knee of the validation fidelity curve, at most --auto-cap")
    a.add_argument("--auto-cap", type=_positive_int, default=AUTO_CAP,
                   help="readability cap on the states --states auto may choose")
    _add_abstraction_options(a)
    a.add_argument("--layer", type=_int,
                   help="check the traces come from this layer (default: no check)")
    a.add_argument("--no-forcing", action="store_true",
                   help="skip the state-forcing figures (they need the model)")
    a.add_argument("--no-index", action="store_true",
                   help="skip building the nearest-context index")
    _add_cluster(a)
    a.set_defaults(func=_cmd_abstract)


def _add_sweep(sub: Any) -> None:
    w = sub.add_parser("sweep", help="simulation fidelity (95%% CI) and forcing agreement "
                       "against the number of states; a table, sweep.json/png/html")
    w.add_argument("run", help="run directory (recorded)")
    _add_renamed(w, "--states", "--candidates", type=_states_list, default=None,
                 help="candidate state counts, comma-separated (default: 4,8,16,32,40, "
                 "less those too few for the classes the model predicts)")
    w.add_argument("--out", help="output directory (default: RUN/sweep)")
    w.add_argument("--split", choices=SPLITS, default=None,
                   help="split measured on (default: test, or val where the data has no "
                   "test inputs)")
    w.add_argument("--no-forcing", action="store_true", help="skip forcing agreement")
    w.add_argument("--progress-json", metavar="FILE", help="keep FILE up to date with the "
                   "candidate being fitted ({stage, done, total}; the explorer reads it; "
                   "default: none)")
    _add_abstraction_options(w)
    w.set_defaults(func=_cmd_sweep)


def _add_force_compare_index(sub: Any) -> None:
    f = sub.add_parser("force", help="state forcing: how often predictions survive when "
                       "hidden states are replaced by their state's centroid")
    f.add_argument("run", help="run directory")
    f.add_argument("--split", default=None, choices=SPLITS,
                   help="split to force (default: test, or val where the data has no test "
                   "inputs)")
    _add_cluster(f)
    f.set_defaults(func=_cmd_force)

    c = sub.add_parser("compare", help="match the states of two runs on the same data and "
                       "list the inputs whose path or prediction changed")
    c.add_argument("run", help="the first run")
    c.add_argument("other", help="the second run (same data set, split and tokenizer)")
    c.add_argument("--split", default=None, choices=SPLITS,
                   help="split to compare (default: test, or val where the data has no test "
                   "inputs)")
    c.add_argument("--out", help="write the matching and the changed inputs as JSON "
                   "(default: print the summary only)")
    c.add_argument("--force", action="store_true", help="overwrite --out")
    c.set_defaults(func=_cmd_compare)

    ix = sub.add_parser("index", help="build the nearest-training-context index of a run")
    ix.add_argument("run", help="run directory")
    _add_cluster(ix)
    ix.set_defaults(func=_cmd_index)


def _add_dfa_export(sub: Any) -> None:
    x = sub.add_parser("extract-dfa", help="refine the abstraction into a deterministic, "
                       "minimised automaton (formal languages)")
    x.add_argument("run", help="run directory")
    x.add_argument("--method", choices=("auto", "active", "refine"), default="auto",
                   help="active: the run's model answers a learner's questions (KV/L*; "
                   "needs the model and two classes); refine: refine the recorded hidden "
                   "states (no model needed); auto: active where it can run")
    x.add_argument("--max-states", type=_positive_int, default=200,
                   help="state budget (refine: before minimisation)")
    x.add_argument("--seconds", type=_positive_float, default=600.0,
                   help="time budget of the active learner")
    x.add_argument("--algorithm", choices=("kv", "lstar"), default="kv",
                   help="the active learner: Kearns-Vazirani or L*")
    x.add_argument("--epsilon", type=_fraction, default=None,
                   help="active: the smallest hypothesis whose validation error is within "
                   "this of the best wins (default: one standard error of the best error, "
                   "at least one validation word's worth)")
    x.add_argument("--tests-on", choices=("auto", "prefixes", "words"), default="auto",
                   help="active: what the equivalence tests compare, the class after every "
                   "prefix of each test word or each whole word's only; auto: whole words")
    x.add_argument("--mutants", type=_nonnegative_int, default=0,
                   help="active: this many words near the training words (one to three "
                   "symbols replaced, the model asked their class) join the validation "
                   "words in the choice among hypotheses (they favour larger automata)")
    x.add_argument("--seed", type=_seed, default=0, help="random seed")
    _add_renamed(x, "--states", "--merge-to", type=_positive_int, default=None,
                 help="at most this many states (default: no cap, the exact automaton): "
                 "merge states whose behaviour agrees and keep the automaton that agrees "
                 "most with the RNN (imperfect RNNs)")
    x.add_argument("--examples", metavar="FILE", default=None,
                   help="strings whose answer you know, one per line as STRING<TAB>LABEL "
                   "(LABEL a class of the run, e.g. accept or reject; '#' lines skipped); "
                   "used as counterexamples first, and the report says how many the DFA "
                   "and the RNN get right (default: none)")
    x.set_defaults(func=_cmd_extract_dfa)

    e = sub.add_parser("export", help="export the FSM/DFA or the traces")
    e.add_argument("run", help="run directory")
    e.add_argument("--format", required=True, choices=FORMATS, metavar="FORMAT",
                   help="one of: %(choices)s")
    e.add_argument("--out", required=True, help="output file ('-' for stdout, text formats)")
    e.add_argument("--dfa", action="store_true",
                   help="export the extracted DFA (any format but traces-csv and html)")
    e.add_argument("--top-k", type=_nonnegative_int,
                   help="keep the top-k outgoing edges per state in a drawing of the FSM or "
                   "the DFA (dot/svg/png/pdf; default: 4, as the explorer; 0: every edge, "
                   "for a lossless DOT); svg/png/pdf refuse a drawing too big to lay out")
    e.add_argument("--min-count", type=_positive_int, default=1,
                   help="drop transitions seen fewer times from a drawing")
    e.add_argument("--force", action="store_true", help="overwrite an existing file")
    e.add_argument("--input", type=int, default=None, metavar="ID",
                   help="--format html: the page of this input's trace (an id of the "
                   "table's id column); default: none, the FSM's page")
    e.add_argument("--split", default=None,
                   help="--format html --input: the split the id is in (default: test)")
    e.set_defaults(func=_cmd_export)
