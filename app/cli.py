"""The ``stateseer`` command line: a thin layer over :mod:`stateseer.app.workflows` and the engine.

Every command takes a run directory (see :mod:`stateseer.rnn_models.run`). Choices come from the
registries of the packages that implement them (architectures, abstractors, export
writers, data sets), read only when a command needs them, so ``stateseer --help`` imports
nothing heavy. Errors in the user's input — bad option values included — are printed as
one line (``stateseer: error: ...``) with exit status 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..rnn_models.formats.errors import StateseerError

__all__ = ["build_parser", "main"]

SPLITS = ("train", "val", "test")


# -- registries (read on first use) -------------------------------------------------------
class _Registry(Sequence[str]):
    """The names of a registry, read whenever argparse looks at them: ``stateseer --help``
    imports no registry it does not show, and an entry added later is a valid choice."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load

    def names(self) -> tuple[str, ...]:
        return tuple(self._load())

    def __getitem__(self, i):  # type: ignore[override]
        return self.names()[i]

    def __len__(self) -> int:
        return len(self.names())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self.names()


def _architectures() -> Any:
    from ..rnn_models.archs import ARCHITECTURES  # torch-free

    return ARCHITECTURES


def _abstractors() -> Any:
    from ..abstraction.abstractor import abstractor_names

    return abstractor_names()


def _export_formats() -> Any:
    from ..abstraction.export import EXPORT_FORMATS

    return (*EXPORT_FORMATS, "html")  # html: one page from the whole run (workflows)


def _arch_options() -> dict[str, tuple[str, Any]]:
    """Every architecture's own train options: name → (the archs that take it, the
    option)."""
    from ..rnn_models.archs import ARCHITECTURES  # torch-free

    out: dict[str, tuple[str, Any]] = {}
    for arch in ARCHITECTURES.values():
        for k, opt in arch.options.items():
            names = f"{out[k][0]}, {arch.name}" if k in out else arch.name
            out[k] = (names, opt)
    return out


def _arch_states() -> Any:
    from ..rnn_models.archs import ARCHITECTURES  # torch-free

    return dict.fromkeys(s for arch in ARCHITECTURES.values() for s in arch.states)


def _features() -> Any:
    from ..abstraction.features import FEATURES

    return FEATURES


def _fallbacks() -> Any:
    from ..abstraction.fsm import FALLBACKS

    return FALLBACKS


ARCHS = _Registry(_architectures)
FEATURES = _Registry(_features)
FALLBACKS = _Registry(_fallbacks)
STATES = _Registry(_arch_states)
METHODS = _Registry(_abstractors)
FORMATS = _Registry(_export_formats)


def _dataset_names() -> str:
    from ..rnn_models.datasets import dataset_names

    return ", ".join(dataset_names())


# -- argument types (range checks) --------------------------------------------------------
def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _nonnegative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _fraction(text: str) -> float:
    value = _float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"an accuracy is between 0 and 1, not {value}")
    return value


def _seed(text: str) -> int:
    value = _int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"a seed is between 0 and 2**32 - 1, not {value}")
    return value


def _port(text: str) -> int:
    value = _int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is between 1 and 65535, not {value}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def _positive_float(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def _nonnegative_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _dropout(text: str) -> float:
    value = _float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"a dropout rate is in [0, 1), not {text}")
    return value


def _states_arg(text: str) -> int | str:
    return text if text == "auto" else _positive_int(text)


def _states_list(text: str) -> list[int]:
    parts = [p for p in text.replace(" ", "").split(",") if p]
    if not parts:
        raise argparse.ArgumentTypeError("give state counts separated by commas, e.g. 4,8,16")
    return sorted({_positive_int(p) for p in parts})


# -- checks before the work starts --------------------------------------------------------
def _writable_ancestor(path: Path) -> None:
    """Refuse ``path`` unless its nearest existing ancestor is a directory we can write."""
    anc = path.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise StateseerError(f"cannot write {path}: {anc} is a file, not a directory; "
                             "choose another --out")
    try:
        tempfile.TemporaryFile(dir=anc).close()
    except OSError as exc:
        raise StateseerError(f"cannot write {path}: {anc} is not writable "
                             f"({exc.strerror}); choose another --out") from None


def _check_out_dir(out: str | Path) -> Path:
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise StateseerError(f"--out {path} is a file; give a directory path")
    _writable_ancestor(path / "x")
    return path


def _check_out_file(out: str | Path, force: bool = False) -> None:
    path = Path(out)
    if path.is_dir():
        raise StateseerError(f"--out {path} is a directory; give a file path")
    if path.exists() and not force:
        raise StateseerError(f"{path} exists; pass --force to overwrite it")
    _writable_ancestor(path)


def _check_bind(host: str, what: str, debug: bool = False, *, warn: bool = True) -> None:
    """``--debug`` only on loopback; a warning on stderr for any other interface (unless
    the server prints its own: ``warn=False``)."""
    from .security import bind_warning, is_loopback

    if is_loopback(host):
        return
    if debug:
        raise StateseerError(f"--debug runs the Werkzeug debugger (code typed in the browser "
                             f"runs here) and is refused on --host {host}; use --host "
                             "127.0.0.1 or drop --debug")
    if warn:
        print(bind_warning(host, what), file=sys.stderr)


# -- commands -----------------------------------------------------------------------------
def _cmd_train(args: argparse.Namespace) -> int:
    from ..rnn_models.run import ModelRun
    from ..rnn_models.train import TrainConfig, train_run

    _check_out_dir(args.out)
    ModelRun(args.out).require_new(args.force)
    cfg = TrainConfig(
        dataset=args.dataset, arch=args.arch or ("mamba" if args.init else "lstm"),
        init=args.init, embed=args.embed, hidden=args.hidden,
        layers=args.layers, dropout=args.dropout, epochs=args.epochs,
        batch_size=args.batch_size, lr=args.lr, patience=args.patience,
        min_freq=args.min_freq, seed=args.seed, state=args.state,
        prefix_loss=args.prefix_loss, tokenizer=args.tokenizer, text_col=args.text_col,
        label_col=args.label_col, max_tokens=args.max_tokens,
        weight_decay=args.weight_decay, max_seconds=args.max_seconds,
        truncate=args.truncate, vocab_exclude=args.vocab_exclude,
        arch_options={k: getattr(args, k) for k in _arch_options()
                      if getattr(args, k, None) is not None},
    )
    run = train_run(cfg, args.out, force=args.force, progress=not args.quiet)
    m = run.metrics()
    print(json.dumps({"run": str(run.path), **{k: m[k] for k in (
        "train_accuracy", "val_accuracy", "test_accuracy", "best_epoch", "train_seconds")}}))
    return 0


def _cmd_create(args: argparse.Namespace) -> int:
    from ..rnn_models.run import create_model_run

    _check_out_dir(args.run)
    run = create_model_run(args.run, args.dataset, args.model, vocab=_read_vocab(args.vocab),
                           text_col=args.text_col, label_col=args.label_col,
                           tokenizer=args.tokenizer, seed=args.seed,
                           max_tokens=args.max_tokens, force=args.force,
                           expect_accuracy=args.expect_accuracy)
    cfg = run.config
    if cfg["model"].get("hf_path"):
        _note(f"every command that needs the model loads the checkpoint in "
              f"{cfg['model']['factory']} with transformers (weights and tokenizer only: no "
              "code from the checkpoint is run)")
    elif cfg["model"].get("factory"):
        _note(f"every command that needs the model (serve included) will import and run "
              f"{cfg['model']['factory']}; share the run only with people who trust that "
              "code")
    print(json.dumps({"run": str(run.path), "factory": cfg["model"]["factory"],
                      "classes": cfg["data"]["classes"], "tokenizer": cfg["data"]["tokenizer"],
                      "vocab_size": cfg["model"]["vocab_size"],
                      "next": f"stateseer record {run.path}"}))
    return 0


def _read_vocab(path: str | None) -> list[str] | None:
    """``--vocab FILE``: a JSON list (or {"tokens": [...]}) or one token per line."""
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StateseerError(f"--vocab {path} cannot be read ({exc}); give a JSON list or a "
                             "text file with one token per line") from None
    try:
        data = json.loads(text)
    except ValueError:
        return [line for line in text.split("\n") if line]
    return data.get("tokens") if isinstance(data, dict) else data


def _cmd_import_traces(args: argparse.Namespace) -> int:
    from ..rnn_models.formats.imported import import_traces

    _check_out_dir(args.run)
    traces = import_traces(args.run, getattr(args, "from"), force=args.force)
    if not traces.meta["proba"]:
        print("stateseer: note: no proba.npy: the run has no predictions; `abstract` will "
              "cluster the hidden states (--features pca) without splitting by prediction",
              file=sys.stderr)
    print(json.dumps({"run": str(args.run), "splits": traces.meta["splits"],
                      "proba": traces.meta["proba"], "next": f"stateseer abstract {args.run}"}))
    return 0


def _cmd_record(args: argparse.Namespace) -> int:
    from ..rnn_models.engine import record_run
    from ..rnn_models.run import ModelRun

    run = ModelRun(args.run)
    traces = record_run(run, splits=args.splits, layer=args.layer, dtype=args.dtype,
                        batch_size=args.batch_size, cluster=args.cluster,
                        shard_size=args.shard_size)
    if run.config.get("model", {}).get("kind") == "factory":  # no training wrote them
        run.update_metrics(**{f"{s}_accuracy": v["accuracy"]
                              for s, v in traces.meta["splits"].items()})
    print(json.dumps({"traces": str(traces.path), "splits": traces.meta["splits"]}))
    return 0


def _note(line: str) -> None:
    print(f"stateseer: note: {line}", file=sys.stderr)


def _abstraction_params(args: argparse.Namespace) -> dict[str, Any]:
    return {"method": args.method, "pca": args.pca, "features": args.features,
            "fallback": args.fallback, "simulation": args.simulation,
            "split_by_prediction": not args.no_split_by_prediction, "random_state": args.seed}


def _cmd_abstract(args: argparse.Namespace) -> int:
    from .workflows.abstract import abstract_workflow

    out = abstract_workflow(args.run, n_states=args.states, cap=args.auto_cap,
                            layer=args.layer, forcing=not args.no_forcing,
                            index=not args.no_index, cluster=args.cluster, log=_note,
                            **_abstraction_params(args))
    print(json.dumps(out))
    return 0


def _forcing(run: str, split: str = "test", cluster: Any = None) -> dict:
    from .workflows.forcing import measure_forcing

    return measure_forcing(run, split=split, cluster=cluster)


def _index(run: str, cluster: Any = None) -> None:
    from ..rnn_models.formats.traces import Traces
    from ..rnn_models.run import ModelRun
    from .workflows.contexts import context_index

    r = ModelRun(run)
    context_index(r, Traces(r.traces_dir), cluster=cluster)


def _cmd_force(args: argparse.Namespace) -> int:
    figs = _forcing(args.run, args.split, args.cluster)
    per = figs["forcing"].get("per_state", {})
    worst = sorted(per.items(), key=lambda kv: kv[1]["agreement"])[:5]
    print(json.dumps({"forcing_agreement": figs["forcing_agreement"],
                      "split": args.split, "n_inputs": figs["forcing"]["n_inputs"],
                      "least_faithful_states": dict(worst),
                      "seconds": figs["forcing"]["seconds"]}))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from .workflows.comparison import compare_runs

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


def _cmd_diagnose(args: argparse.Namespace) -> int:
    from .workflows.diagnose import diagnose_run, findings_table

    doc = diagnose_run(args.run, split=args.split, top=args.top,
                       min_support=args.min_support, log=_note)
    print(findings_table(doc))
    print(json.dumps({"findings": f"{args.run}/diagnosis/findings.json",
                      "significant": doc["n_significant"], "seconds": doc["seconds"]}))
    return 0


def _progress_writer(path: str | None) -> Callable[[str, int, int], None] | None:
    """``report(stage, done, total)`` keeping ``--progress-json FILE`` up to date (the
    explorer's background jobs read it), or None without the option."""
    if not path:
        return None
    from ..rnn_models.formats.atomic import atomic_write_text

    def report(stage: str, done: int, total: int) -> None:
        atomic_write_text(Path(path), json.dumps({"stage": stage, "done": done,
                                                  "total": total}))
    return report


def _cmd_repair(args: argparse.Namespace) -> int:
    from .workflows.repair import repair_run

    _check_out_dir(args.out)
    report = _progress_writer(args.progress_json)
    doc = repair_run(args.run, finding=args.finding, action=args.action, out=args.out,
                     seed=args.seed, progress=not args.quiet, log=_note, report=report,
                     control=args.control, seeds=args.seeds)
    print(json.dumps({k: doc[k] for k in ("before", "after", "delta", "delta_ci",
                                          "per_class_delta", "finding_gone", "control",
                                          "seeds")
                      if k in doc}))
    return 0


def _cmd_extract_dfa(args: argparse.Namespace) -> int:
    from .workflows.dfa import extract_run_dfa

    dfa = extract_run_dfa(args.run, max_states=args.max_states, random_state=args.seed,
                          examples=args.examples, states=args.states)
    keys = ("n_states", "n_states_before_minimisation", "seconds", "budget_exhausted",
            "agreement", "agreement_le12", "grammar_agreement_le12", "minimal_size_match",
            "examples")
    print(json.dumps({k: dfa.report.get(k) for k in keys if k in dfa.report}))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .workflows.exports import export_run

    if str(args.out) != "-":
        _check_out_file(args.out, force=True)  # export_run refuses to overwrite by itself
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
    from .workflows.sweep import sweep_run, sweep_table, write_sweep

    out = _check_out_dir(args.out or Path(args.run) / "sweep")
    from .workflows.abstract import imported_params

    points = sweep_run(args.run, args.states, split=args.split, forcing=not args.no_forcing,
                       log=lambda msg: print(f"stateseer sweep: {msg}", file=sys.stderr),
                       report=_progress_writer(args.progress_json),
                       **imported_params(args.run, _abstraction_params(args), _note))
    written = write_sweep(points, out)
    print(sweep_table(points))
    if written["png"] is None:
        print("stateseer: note: sweep.png skipped (matplotlib is not installed)",
              file=sys.stderr)
    print(json.dumps({"written": written, "split": args.split}))
    return 0


def _serve(run: str, host: str, port: int, debug: bool = False,
           compare: str | None = None, allowed_hosts: list[str] | None = None) -> int:
    from .main import serve

    _check_bind(host, "the explorer", debug, warn=False)  # serve() warns itself
    return serve(run, host, port, compare=compare, allowed_hosts=allowed_hosts, debug=debug)


def _cmd_serve(args: argparse.Namespace) -> int:
    return _serve(args.run, args.host, args.port, args.debug, compare=args.compare,
                  allowed_hosts=args.allowed_hosts)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .workflows.prepare import prepare_run

    if not args.no_serve:
        _check_bind(args.host, "the explorer", warn=False)  # warned when served
    prepare_run(args.run, n_states=args.states,
                log=lambda msg: print(f"stateseer demo: {msg}", file=sys.stderr))
    if args.no_serve:
        print(json.dumps({"run": args.run, "fsm": f"{args.run}/abstraction/fsm.json"}))
        return 0
    return _serve(args.run, args.host, args.port, allowed_hosts=args.allowed_hosts)


def _cmd_study(args: argparse.Namespace) -> int:
    from .study.server import serve_study

    token = args.admin_token or os.environ.get("STATESEER_ADMIN_TOKEN") or None
    _check_bind(args.host, "the study server" + (" (and its admin token)" if token else ""))
    return serve_study(args.study_file, db=args.db, run=args.run, host=args.host,
                       port=args.port, admin_token=token, access_log=args.access_log,
                       allowed_hosts=args.allowed_hosts, bind_warned=True)  # warned once


def _cmd_study_export(args: argparse.Namespace) -> int:
    from .study.export import export_study

    _check_out_dir(args.out)
    print(json.dumps({"written": export_study(args.db, args.out, args.format,
                                              coding=args.coding, long=args.long)}))
    return 0


def _cmd_study_analyze(args: argparse.Namespace) -> int:
    from .study.analysis import analyze_study

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
    from .study.replication import deepseer_study
    from .study.spec import parse_study

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


# -- the parser: one small function per command -------------------------------------------
class _HelpFormatter(argparse.HelpFormatter):
    """Shows every option's default (when it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("%(default)" in text or not action.option_strings or action.default is None
                or action.default is False or action.default is argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line that points at ``--help``; every help shows defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"stateseer: error: {message} (see `{self.prog} --help`)\n")


def _add_train(sub: Any) -> None:
    t = sub.add_parser("train", help="train a recurrent classifier (LSTM, GRU, Elman, minGRU, "
                           "minLSTM, Mamba) into a run directory")
    t.add_argument("--dataset", required=True,
                   help=f"a built-in data set ({_dataset_names()}), csv:PATH or jsonl:PATH")
    t.add_argument("--arch", choices=ARCHS, metavar="ARCH",
                   help="architecture: %(choices)s (default: lstm; mamba with --init)")
    t.add_argument("--init", metavar="hf:PATH",
                   help="start from a local Hugging Face Mamba checkpoint (MambaModel or "
                   "MambaForCausalLM, with its tokenizer): its weights, sizes and tokenizer, "
                   "a new head, all fine-tuned (pip install 'stateseer[hf]'; default: a model "
                   "built from scratch)")
    t.add_argument("--out", required=True, help="run directory to create, e.g. runs/rt")
    per_set = "(default: chosen for the data set)"
    for name, text in (("layers", "recurrent layers"), ("hidden", "hidden state size"),
                       ("embed", "embedding size"), ("epochs", "most epochs"),
                       ("batch-size", "training batch size"),
                       ("patience", "epochs without validation gain before stopping"),
                       ("min-freq", "fewest occurrences for a token to get an id")):
        t.add_argument(f"--{name}", type=_positive_int, help=f"{text} {per_set}")
    t.add_argument("--lr", type=_positive_float, help=f"learning rate {per_set}")
    t.add_argument("--dropout", type=_dropout, help=f"dropout rate in [0, 1) {per_set}")
    t.add_argument("--seed", type=_seed, default=0, help="random seed (split and weights)")
    t.add_argument("--state", choices=STATES, metavar="STATE",
                   help="state to trace, one of the arch's: %(choices)s (default: the arch's "
                   "first: h; for mamba ssm on text, full on formal languages; lstm has h, "
                   "c, hc)")
    for name, (archs, opt) in _arch_options().items():  # each arch's own flags
        kind = {"choices": opt.choices} if opt.choices else {"type": _positive_int}
        t.add_argument(f"--{name.replace('_', '-')}", dest=name, **kind,
                       help=f"{archs}: {opt.help} {per_set}")
    t.add_argument("--weight-decay", type=_nonnegative_float, help=f"Adam weight decay (L2) "
                   f"{per_set}")
    t.add_argument("--max-seconds", type=_positive_float,
                   help="training budget in seconds, checked between batches (default: none)")
    t.add_argument("--prefix-loss", choices=("auto", "on", "off", "label"), default="auto",
                   help="train on the label of every prefix: on: where a prefix's label is "
                        "known (formal languages), label: every prefix toward its text's "
                        "label (auto: on for formal languages, label for mamba on text)")
    t.add_argument("--text-col", default="text", help="text column (csv:/jsonl:)")
    t.add_argument("--label-col", default="label", help="label column (csv:/jsonl:)")
    t.add_argument("--tokenizer", choices=("word", "char", "space"), default="word",
                   help="tokenizer for csv:/jsonl: data")
    t.add_argument("--max-tokens", type=_positive_int, default=2000,
                   help="refuse texts longer than this many tokens")
    t.add_argument("--truncate", type=_positive_int, metavar="N",
                   help="show the model only each input's first N tokens, in training, "
                   "recording and typed inputs (default: whole inputs)")
    t.add_argument("--vocab-exclude", metavar="REGEX",
                   help="keep tokens that match REGEX (whole token) out of the vocabulary: "
                   "the model reads them as <unk> (default: none)")
    t.add_argument("--force", action="store_true", help="overwrite an existing run")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=_cmd_train)


def _add_create(sub: Any) -> None:
    c = sub.add_parser("create", help="a run for your own model: MODULE:FACTORY returns a "
                       "model in the protocol of stateseer.rnn_models.protocol")
    c.add_argument("run", help="run directory to create, e.g. runs/mine")
    c.add_argument("--model", required=True, metavar="MODULE:FACTORY",
                   help="an importable module (current directory first) or a .py path, and "
                   "the function called with no arguments that returns the model; or "
                   "hf:PATH, a local Hugging Face *ForSequenceClassification checkpoint "
                   "(Jamba, Zamba, Llama …) with its tokenizer (pip install "
                   "'stateseer[hf]')")
    c.add_argument("--dataset", required=True,
                   help=f"a built-in data set ({_dataset_names()}), csv:PATH or jsonl:PATH")
    c.add_argument("--text-col", default="text", help="text column (csv:/jsonl:)")
    c.add_argument("--label-col", default="label", help="label column (csv:/jsonl:)")
    c.add_argument("--tokenizer", choices=("model", "word", "char", "space"),
                   help="tokenizer (default: the model's `tokenize` when it has one, else "
                   "word)")
    c.add_argument("--vocab", metavar="FILE", help="the model's vocabulary when the model "
                   "declares none: a JSON list of tokens in id order, or one per line "
                   "('<pad>', '<unk>' first; default: the model's `vocab`)")
    c.add_argument("--seed", type=_seed, default=0, help="seed of the data set's split")
    c.add_argument("--max-tokens", type=_positive_int, default=2000,
                   help="refuse texts longer than this many tokens")
    c.add_argument("--expect-accuracy", type=_fraction, metavar="X",
                   help="the test accuracy you measured on your model; `record` warns if it "
                   "records another (default: no check)")
    c.add_argument("--force", action="store_true", help="overwrite an existing run")
    c.set_defaults(func=_cmd_create)

    i = sub.add_parser("import-traces", help="a run from traces written by another framework "
                       "(numpy only; no model)",
                       description="DIR holds manifest.json ({\"classes\": [...], "
                       "\"splits\": [\"train\", ...]}) and per split hidden.npy (n_steps, d), "
                       "offsets.npy (n_inputs+1), tokens.json (or tokens.txt), labels.npy, "
                       "optional proba.npy (n_steps, n_classes) and texts.json; optional "
                       "initial.npy, initial_proba.npy, vocab.json. Full format: "
                       "rnn_models/formats/imported.py.")
    i.add_argument("run", help="run directory to create")
    i.add_argument("--from", required=True, metavar="DIR", help="the folder of traces")
    i.add_argument("--force", action="store_true", help="overwrite an existing run")
    i.set_defaults(func=_cmd_import_traces)


def _add_record(sub: Any) -> None:
    r = sub.add_parser("record", help="record hidden-state traces for every split")
    r.add_argument("run", help="run directory")
    r.add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS,
                   help="splits to record")
    r.add_argument("--layer", type=_int, default=-1, help="recurrent layer (-1: the top)")
    r.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                   help="storage type of the hidden states")
    r.add_argument("--batch-size", type=_positive_int, default=256, help="inputs per batch")
    r.add_argument("--shard-size", type=_positive_int, default=None,
                   help="inputs per trace shard (default: $STATESEER_SHARD_SIZE, else 65,536: "
                        "one shard for ordinary runs); the layout never depends on the workers")
    _add_cluster(r)
    r.set_defaults(func=_cmd_record)


def _cluster(text: str) -> str:
    from ..rnn_models.formats.engine import ClusterError, parse_address

    try:
        parse_address(text)
    except ClusterError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--cluster {text!r}: ")) \
            from None
    return text


def _add_cluster(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", metavar="ADDRESS", default=None, type=_cluster,
                   help="run the per-shard work on Dask: local, local:N (N worker "
                   "processes) or tcp://HOST:PORT (a running `dask scheduler`); default "
                   "$STATESEER_CLUSTER, else this process")


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
    a.add_argument("--states", type=_states_arg, default=40,
                   help="abstract states (the FSM adds the initial state), or 'auto': the "
                   "knee of the validation fidelity curve, at most --auto-cap")
    a.add_argument("--auto-cap", type=_positive_int, default=40,
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
    w.add_argument("--states", type=_states_list, default=None,
                   help="candidate state counts, comma-separated (default: 4,8,16,32,40, "
                   "less those too few for the classes the model predicts)")
    w.add_argument("--out", help="output directory (default: RUN/sweep)")
    w.add_argument("--split", choices=SPLITS, default="test", help="split measured on")
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
    f.add_argument("--split", default="test", choices=SPLITS, help="split to force")
    _add_cluster(f)
    f.set_defaults(func=_cmd_force)

    c = sub.add_parser("compare", help="match the states of two runs on the same data and "
                       "list the inputs whose path or prediction changed")
    c.add_argument("run", help="the first run")
    c.add_argument("other", help="the second run (same data set, split and tokenizer)")
    c.add_argument("--split", default="test", choices=SPLITS, help="split to compare")
    c.add_argument("--out", help="write the matching and the changed inputs as JSON "
                   "(default: print the summary only)")
    c.add_argument("--force", action="store_true", help="overwrite --out")
    c.set_defaults(func=_cmd_compare)

    ix = sub.add_parser("index", help="build the nearest-training-context index of a run")
    ix.add_argument("run", help="run directory")
    _add_cluster(ix)
    ix.set_defaults(func=_cmd_index)


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

    from .workflows.repair import ACTIONS

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
    r.add_argument("--out", required=True, help="the new run directory (must not exist)")
    r.add_argument("--seed", type=_seed, default=0,
                   help="seed of what the repair draws (the confusion suspects' folds, "
                   "augment's copies, the control's 1%%); not the training seed, which "
                   "stays RUN's")
    r.add_argument("--control", action="store_true",
                   help="also train RUN's own data less a random 1%% of its training "
                   "inputs (OUT/control): how far retraining alone moves the accuracy and "
                   "single classes, to read the repair's change against")
    r.add_argument("--seeds", type=_positive_int, default=1, metavar="N",
                   help="also train RUN's data and the edited data with N-1 more seeds each "
                   "and report the mean change with a 95%% interval over the seeds, and "
                   "per class: one training's change holds that training's luck (N "
                   "times the training time; default: 1, the repair alone)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--progress-json", metavar="FILE", help="keep FILE up to date with the "
                   "work's stage as JSON ({stage, done, total}), for a tool that shows it "
                   "(default: none)")
    r.set_defaults(func=_cmd_repair)


def _add_dfa_export(sub: Any) -> None:
    x = sub.add_parser("extract-dfa", help="refine the abstraction into a deterministic, "
                       "minimised automaton (formal languages)")
    x.add_argument("run", help="run directory")
    x.add_argument("--max-states", type=_positive_int, default=200,
                   help="state budget before minimisation")
    x.add_argument("--seed", type=_seed, default=0, help="random seed")
    x.add_argument("--states", type=_positive_int, default=None,
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
    e.add_argument("--dfa", action="store_true", help="export the extracted DFA")
    e.add_argument("--top-k", type=_nonnegative_int,
                   help="keep the top-k outgoing edges per state in a drawing (dot/svg/png/"
                   "pdf; default: 4, as the explorer; 0: every edge, for a lossless DOT)")
    e.add_argument("--min-count", type=_positive_int, default=1,
                   help="drop transitions seen fewer times")
    e.add_argument("--force", action="store_true", help="overwrite an existing file")
    e.add_argument("--input", type=int, default=None, metavar="ID",
                   help="--format html: the page of this input's trace (an id of the "
                   "table's id column); default: none, the FSM's page")
    e.add_argument("--split", default=None,
                   help="--format html --input: the split the id is in (default: test)")
    e.set_defaults(func=_cmd_export)


def _host_list(text: str) -> list[str]:
    """``--allowed-hosts a.example,b.example`` as a list of names."""
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise argparse.ArgumentTypeError("give one or more host names separated by commas")
    return hosts


def _add_host_port(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (127.0.0.1: this machine only; others get a warning)")
    p.add_argument("--port", type=_port, default=8050, help="TCP port")
    p.add_argument("--allowed-hosts", type=_host_list, default=None, metavar="H1,H2",
                   help="host names (besides loopback, IP addresses and --host) the server "
                   "answers, against DNS rebinding; default: $STATESEER_ALLOWED_HOSTS")


def _add_serving(sub: Any) -> None:
    d = sub.add_parser("demo", help="train or reuse the default LSTM on rotten_tomatoes, "
                       "record, abstract, diagnose and serve it")
    d.add_argument("--run", default="runs/rt", help="run directory")
    d.add_argument("--states", type=_positive_int, default=40, help="abstract states")
    _add_host_port(d)
    d.add_argument("--no-serve", action="store_true", help="prepare the run but do not serve")
    d.set_defaults(func=_cmd_demo)

    s = sub.add_parser("serve", help="serve the explorer app for a run")
    s.add_argument("run", help="run directory")
    _add_host_port(s)
    s.add_argument("--debug", action="store_true",
                   help="Dash debug mode (loopback --host only: it can run code)")
    s.add_argument("--compare", metavar="OTHER_RUN",
                   help="a second run on the same data to compare with (states matched by "
                   "co-occurrence; changed inputs listed; default: none)")
    s.set_defaults(func=_cmd_serve)


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


COMMANDS = (_add_train, _add_create, _add_record, _add_abstract, _add_sweep,
            _add_force_compare_index, _add_diagnose, _add_dfa_export, _add_serving,
            _add_study)


def build_parser() -> argparse.ArgumentParser:
    """The ``stateseer`` argument parser (one sub-parser per command)."""
    p = _Parser(prog="stateseer",
                description="Explain recurrent text classifiers by state abstraction.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return p


def _unexpected(command: str, exc: Exception) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return (f"`stateseer {command}` stopped on unexpected input ({type(exc).__name__}"
            f"{': ' + first if first else ''}); a file it read may be damaged — re-run the "
            "step that wrote it (STATESEER_TRACEBACK=1 shows where)")


def _one_line_warning(message: Warning | str, category: type[Warning], *_: Any,
                      **__: Any) -> str:
    return f"stateseer: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for any error in the input)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a one-line usage error
        return exc.code if isinstance(exc.code, int) else 2
    previous = warnings.formatwarning
    warnings.formatwarning = _one_line_warning  # type: ignore[assignment]
    try:
        if hasattr(args, "cluster"):  # every command that takes --cluster: refused alike
            from ..rnn_models.formats.engine import check_cluster

            check_cluster(args.cluster)
        return int(args.func(args) or 0)
    except StateseerError as exc:
        print(f"stateseer: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stateseer: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a loader that did not wrap its failure: still one line
        if os.environ.get("STATESEER_TRACEBACK"):
            raise
        print(f"stateseer: error: {_unexpected(args.command, exc)}", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = previous  # type: ignore[assignment]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
