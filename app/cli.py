"""The ``stateseer`` command line.

Every command takes a run directory (see :mod:`rnn_models.run`). Errors in the user's
input are printed as one line (``stateseer: error: ...``) with exit status 2; heavy
imports happen inside the command that needs them so ``stateseer --help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rnn_models.errors import StateseerError

__all__ = ["build_parser", "main"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _cmd_train(args: argparse.Namespace) -> int:
    from rnn_models.train import TrainConfig, train_run

    cfg = TrainConfig(
        dataset=args.dataset, arch=args.arch, embed=args.embed, hidden=args.hidden,
        layers=args.layers, dropout=args.dropout, epochs=args.epochs,
        batch_size=args.batch_size, lr=args.lr, patience=args.patience,
        min_freq=args.min_freq, seed=args.seed, state=args.state,
        prefix_loss=args.prefix_loss, tokenizer=args.tokenizer, text_col=args.text_col,
        label_col=args.label_col, max_tokens=args.max_tokens,
    )
    run = train_run(cfg, args.out, force=args.force, progress=not args.quiet)
    m = run.metrics()
    print(json.dumps({"run": str(run.path), **{k: m[k] for k in (
        "train_accuracy", "val_accuracy", "test_accuracy", "best_epoch", "train_seconds")}}))
    return 0


def _cmd_record(args: argparse.Namespace) -> int:
    from rnn_models.record import record_run

    traces = record_run(args.run, splits=args.splits, layer=args.layer, dtype=args.dtype,
                        batch_size=args.batch_size)
    print(json.dumps({"traces": str(traces.path), "splits": traces.meta["splits"]}))
    return 0


def _states_arg(text: str) -> int | str:
    if text == "auto":
        return text
    return _positive_int(text)


def _cmd_abstract(args: argparse.Namespace) -> int:
    from abstraction.pipeline import abstract_run

    ab = abstract_run(args.run, n_states=args.states, method=args.method, pca=args.pca,
                      features=args.features, layer=args.layer, fallback=args.fallback,
                      split_by_prediction=not args.no_split_by_prediction,
                      random_state=args.seed)
    keys = ("n_states", "label_fidelity", "simulation_fidelity", "state_purity",
            "state_coverage", "transition_coverage", "evaluated_on", "seconds")
    out = {k: ab.metrics[k] for k in keys}
    if not args.no_forcing:
        try:
            out["forcing_agreement"] = _forcing(args.run)["forcing_agreement"]
        except StateseerError as exc:  # e.g. a run of a user's own model: abstraction stays
            print(f"stateseer: note: state forcing skipped ({exc})", file=sys.stderr)
    if not args.no_index:
        _index(args.run)
    print(json.dumps(out))
    return 0


def _forcing(run: str, split: str = "test") -> dict:
    from .analysis import measure_forcing

    return measure_forcing(run, split=split)


def _index(run: str) -> None:
    from rnn_models.run import Run
    from rnn_models.traces import Traces

    from .analysis import context_index

    r = Run(run)
    context_index(r, Traces(r.traces_dir))


def _cmd_force(args: argparse.Namespace) -> int:
    figs = _forcing(args.run, args.split)
    per = figs["forcing"].get("per_state", {})
    worst = sorted(per.items(), key=lambda kv: kv[1]["agreement"])[:5]
    print(json.dumps({"forcing_agreement": figs["forcing_agreement"],
                      "split": args.split, "n_inputs": figs["forcing"]["n_inputs"],
                      "least_faithful_states": {k: v for k, v in worst},
                      "seconds": figs["forcing"]["seconds"]}))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rnn_models.run import atomic_write_text

    from .data import RunData

    data = RunData(args.run)
    data.other = RunData(args.other)
    cmp_ = data.comparison(args.split)
    if args.out:
        out = Path(args.out)
        if out.exists() and not args.force:
            raise StateseerError(f"{out} exists; pass --force to overwrite it")
        tr = data.traces[args.split]
        ch, classes = cmp_["changed"], data.classes
        changed = [
            {"index": int(i), "id": int(tr.rows[i]), "label": classes[int(tr.labels[i])],
             "prediction_a": classes[int(tr.predictions[i])],
             "prediction_b": classes[int(cmp_["pred_b"][i])],
             "n_steps": int(ch["n_steps"][i]), "n_diff": int(ch["n_diff"][i]),
             "first_diff": int(ch["first_diff"][i])}
            for i in range(tr.n_inputs) if ch["path_changed"][i] or ch["prediction_changed"][i]]
        doc = {"format": "stateseer.comparison", "version": 1, "run_a": str(args.run),
               "run_b": str(args.other), "summary": cmp_["summary"],
               "matching": cmp_["matching"].pairs(), "changed": changed}
        atomic_write_text(out, json.dumps(doc, indent=1))
    print(json.dumps(cmp_["summary"]))
    return 0


def _cmd_index(args: argparse.Namespace) -> int:
    import time

    t0 = time.perf_counter()
    _index(args.run)
    print(json.dumps({"index": f"{args.run}/index/train.contexts.npz",
                      "seconds": round(time.perf_counter() - t0, 2)}))
    return 0


def _cmd_extract_dfa(args: argparse.Namespace) -> int:
    from abstraction.exporting import extract_run_dfa

    dfa = extract_run_dfa(args.run, max_states=args.max_states, random_state=args.seed)
    keys = ("n_states", "n_states_before_minimisation", "seconds", "budget_exhausted",
            "agreement", "agreement_le12", "grammar_agreement_le12", "minimal_size_match")
    print(json.dumps({k: dfa.report.get(k) for k in keys if k in dfa.report}))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from abstraction.exporting import export_run

    path = export_run(args.run, args.format, args.out, dfa=args.dfa, top_k=args.top_k,
                      min_count=args.min_count, overwrite=args.force)
    print(json.dumps({"written": str(path), "format": args.format}),
          file=sys.stderr if str(args.out) == "-" else sys.stdout)
    return 0


def prepare_run(run_dir: str, *, dataset: str = "rotten_tomatoes", arch: str = "lstm",
                n_states: int = 40, log=print) -> None:
    """Train, record and abstract ``run_dir`` unless each step's output is already there
    and up to date (the demo's "trains or reuses")."""
    from abstraction.pipeline import abstract_run
    from rnn_models.record import record_run
    from rnn_models.run import Run
    from rnn_models.traces import Traces
    from rnn_models.train import TrainConfig, train_run

    run = Run(run_dir)
    if run.exists() and run.model_path.exists():
        log(f"reusing the model in {run.path}")
    else:
        article = "a" if arch == "gru" else "an"  # "an LSTM", "an RNN"
        log(f"training {article} {arch.upper()} on {dataset} into {run.path} (a minute or two)")
        train_run(TrainConfig(dataset=dataset, arch=arch), run.path, force=True)
    sha = run.model_sha256()
    fresh = (run.traces_dir / "meta.json").exists() and \
        Traces(run.traces_dir).meta.get("model_sha256") == sha
    if not fresh:
        log("recording traces")
        record_run(run)
    meta = run.abstraction_dir / "meta.json"
    if not fresh or not meta.exists() or \
            json.loads(meta.read_text())["info"].get("model_sha256") != sha:
        log(f"abstracting into {n_states} states")
        abstract_run(run, n_states=n_states)
    if "forcing_agreement" not in run.metrics().get("abstraction", {}):
        log("forcing states to their centroids (interventional faithfulness)")
        try:
            _forcing(str(run.path))
        except StateseerError as exc:
            log(f"state forcing skipped ({exc})")
    log("indexing training contexts")
    _index(str(run.path))
    m = run.metrics()
    a = m.get("abstraction", {})
    log(f"test accuracy {m.get('test_accuracy', float('nan')):.3f}; label fidelity "
        f"{a.get('label_fidelity', float('nan')):.3f}; simulation fidelity "
        f"{a.get('simulation_fidelity', float('nan')):.3f}; forcing agreement "
        f"{a.get('forcing_agreement', float('nan')):.3f}")


def _serve(run: str, host: str, port: int, debug: bool = False,
           compare: str | None = None) -> int:
    import time

    from .main import create_app

    t0 = time.perf_counter()
    app = create_app(run, compare=compare)
    print(f"stateseer: serving {run} on http://{host}:{port}/ (ready in "
          f"{time.perf_counter() - t0:.1f} s; Ctrl+C to stop)", file=sys.stderr)
    app.run(host=host, port=port, debug=debug)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    return _serve(args.run, args.host, args.port, args.debug, compare=args.compare)


def _cmd_demo(args: argparse.Namespace) -> int:
    prepare_run(args.run, n_states=args.states,
                log=lambda msg: print(f"stateseer demo: {msg}", file=sys.stderr))
    if args.no_serve:
        print(json.dumps({"run": args.run, "fsm": f"{args.run}/abstraction/fsm.json"}))
        return 0
    return _serve(args.run, args.host, args.port)


def _cmd_study(args: argparse.Namespace) -> int:
    import os

    from .study.server import serve_study

    token = args.admin_token or os.environ.get("STATESEER_ADMIN_TOKEN") or None
    return serve_study(args.study_file, db=args.db, run=args.run, host=args.host,
                       port=args.port, admin_token=token, access_log=args.access_log)


def _cmd_study_export(args: argparse.Namespace) -> int:
    from .study.export import export_study

    print(json.dumps({"written": export_study(args.db, args.out, args.format)}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stateseer",
        description="Explain recurrent text classifiers by state abstraction.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("train", help="train an LSTM/GRU/Elman classifier into a run directory")
    t.add_argument("--dataset", required=True,
                   help="rotten_tomatoes, amazon_food, tomita1..7, parens, csv:PATH, jsonl:PATH")
    t.add_argument("--arch", choices=("lstm", "gru", "rnn"), default="lstm")
    t.add_argument("--out", required=True, help="run directory to create, e.g. runs/rt")
    t.add_argument("--layers", type=_positive_int)
    t.add_argument("--hidden", type=_positive_int)
    t.add_argument("--embed", type=_positive_int)
    t.add_argument("--epochs", type=_positive_int)
    t.add_argument("--batch-size", type=_positive_int)
    t.add_argument("--lr", type=float)
    t.add_argument("--dropout", type=float)
    t.add_argument("--patience", type=_positive_int)
    t.add_argument("--min-freq", type=_positive_int)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--state", choices=("h", "c", "hc"), default="h",
                   help="LSTM state to trace: h, c or both (default h)")
    t.add_argument("--prefix-loss", choices=("auto", "on", "off"), default="auto",
                   help="train on the label of every prefix (auto: formal languages)")
    t.add_argument("--text-col", default="text")
    t.add_argument("--label-col", default="label")
    t.add_argument("--tokenizer", choices=("word", "char", "space"), default="word")
    t.add_argument("--max-tokens", type=_positive_int, default=2000,
                   help="refuse texts longer than this many tokens")
    t.add_argument("--force", action="store_true", help="overwrite an existing run")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=_cmd_train)

    r = sub.add_parser("record", help="record hidden-state traces for every split")
    r.add_argument("run")
    r.add_argument("--splits", nargs="+", default=["train", "val", "test"],
                   choices=("train", "val", "test"))
    r.add_argument("--layer", type=int, default=-1, help="recurrent layer (default: top)")
    r.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    r.add_argument("--batch-size", type=_positive_int, default=256)
    r.set_defaults(func=_cmd_record)

    a = sub.add_parser("abstract", help="cluster hidden states into abstract states and an FSM")
    a.add_argument("run")
    a.add_argument("--states", type=_states_arg, default=40,
                   help="abstract states (the FSM adds the initial state), or 'auto'")
    a.add_argument("--method", choices=("kmeans", "gmm", "grid"), default="kmeans")
    a.add_argument("--features", choices=("margin", "pca"), default="margin",
                   help="cluster in the classifier's logit-margin space (default) or in PCA "
                   "space (DeepSeer)")
    a.add_argument("--pca", type=_positive_int, default=20,
                   help="PCA components (with --features pca)")
    a.add_argument("--layer", type=int, help="check the traces come from this layer")
    a.add_argument("--fallback", choices=("displacement", "nearest", "token", "stay"),
                   default="displacement",
                   help="FSM simulation rule for unseen (state, token) pairs")
    a.add_argument("--no-split-by-prediction", action="store_true",
                   help="let states mix hidden states of different predicted classes")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--no-forcing", action="store_true",
                   help="skip the state-forcing figures (they need model.pt)")
    a.add_argument("--no-index", action="store_true",
                   help="skip building the nearest-context index")
    a.set_defaults(func=_cmd_abstract)

    f = sub.add_parser("force", help="state forcing: how often predictions survive when "
                       "hidden states are replaced by their state's centroid")
    f.add_argument("run")
    f.add_argument("--split", default="test", choices=("train", "val", "test"))
    f.set_defaults(func=_cmd_force)

    c = sub.add_parser("compare", help="match the states of two runs on the same data and "
                       "list the inputs whose path or prediction changed")
    c.add_argument("run")
    c.add_argument("other", help="the second run (same data set, split and tokenizer)")
    c.add_argument("--split", default="test", choices=("train", "val", "test"))
    c.add_argument("--out", help="write the matching and the changed inputs as JSON")
    c.add_argument("--force", action="store_true", help="overwrite --out")
    c.set_defaults(func=_cmd_compare)

    ix = sub.add_parser("index", help="build the nearest-training-context index of a run")
    ix.add_argument("run")
    ix.set_defaults(func=_cmd_index)

    x = sub.add_parser("extract-dfa", help="refine the abstraction into a deterministic, "
                       "minimised automaton (formal languages)")
    x.add_argument("run")
    x.add_argument("--max-states", type=_positive_int, default=200,
                   help="state budget before minimisation")
    x.add_argument("--seed", type=int, default=0)
    x.set_defaults(func=_cmd_extract_dfa)

    e = sub.add_parser("export", help="export the FSM/DFA or the traces")
    e.add_argument("run")
    e.add_argument("--format", required=True, choices=(
        "json", "dot", "svg", "png", "pdf", "graphml", "node-link", "traces-csv"))
    e.add_argument("--out", required=True, help="output file ('-' for stdout, text formats)")
    e.add_argument("--dfa", action="store_true", help="export the extracted DFA")
    e.add_argument("--top-k", type=_positive_int,
                   help="keep the top-k outgoing edges per state (dot/svg/png/pdf)")
    e.add_argument("--min-count", type=_positive_int, default=1)
    e.add_argument("--force", action="store_true", help="overwrite an existing file")
    e.set_defaults(func=_cmd_export)

    d = sub.add_parser("demo", help="train or reuse the default LSTM on rotten_tomatoes, "
                       "record, abstract and serve it")
    d.add_argument("--run", default="runs/rt", help="run directory (default runs/rt)")
    d.add_argument("--states", type=_positive_int, default=40)
    d.add_argument("--host", default="127.0.0.1")
    d.add_argument("--port", type=int, default=8050)
    d.add_argument("--no-serve", action="store_true", help="prepare the run but do not serve")
    d.set_defaults(func=_cmd_demo)

    s = sub.add_parser("serve", help="serve the explorer app for a run")
    s.add_argument("run")
    s.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8050)
    s.add_argument("--debug", action="store_true")
    s.add_argument("--compare", metavar="OTHER_RUN",
                   help="a second run on the same data to compare with (states matched by "
                   "co-occurrence; changed inputs listed)")
    s.set_defaults(func=_cmd_serve)

    st = sub.add_parser("study", help="serve a user study: participants, conditions, tasks "
                        "and an interaction log")
    st.add_argument("study_file", help="the study file (JSON, or YAML with PyYAML)")
    st.add_argument("--run", help="run directory to show instead of the study file's 'run'")
    st.add_argument("--db", help="SQLite interaction log (default study-ID.sqlite here)")
    st.add_argument("--host", default="127.0.0.1",
                    help="interface to bind (default 127.0.0.1: this machine only)")
    st.add_argument("--port", type=int, default=8050)
    st.add_argument("--admin-token", help="turn the admin page on (/study/admin) with this "
                    "token (or set $STATESEER_ADMIN_TOKEN); off by default")
    st.add_argument("--access-log", action="store_true", help="print every HTTP request")
    st.set_defaults(func=_cmd_study)

    se = sub.add_parser("study-export", help="a study's interaction log as CSV/Parquet tables")
    se.add_argument("db", help="the SQLite log written by `stateseer study`")
    se.add_argument("--out", required=True, help="folder for events, answers and summary")
    se.add_argument("--format", choices=("csv", "parquet"), default="csv")
    se.set_defaults(func=_cmd_study_export)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except StateseerError as exc:
        print(f"stateseer: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stateseer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
