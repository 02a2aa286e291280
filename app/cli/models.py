"""Commands that make a run: ``train``, ``create`` (a user's own model), ``import-traces``
and ``record``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from stateseer.app.cli.options import (
    ARCHS,
    SPLITS,
    STATES,
    _add_cluster,
    _arch_options,
    _check_out_dir,
    _colors_arg,
    _dataset_names,
    _dropout,
    _fraction,
    _int,
    _nonnegative_float,
    _note,
    _positive_float,
    _positive_int,
    _seed,
    _set_colors,
)
from stateseer.core.errors import StateseerError


# -- commands -----------------------------------------------------------------------------
def _cmd_train(args: argparse.Namespace) -> int:
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.train import TrainConfig, train_run

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
    if args.colors:
        _set_colors(run.path, args.colors)
    m = run.metrics()
    if m.get("test_accuracy") is None:
        _note("the data set has no test inputs, so test accuracy is not measured (null); "
              f"diagnose the val split: `stateseer diagnose {run.path} --split val`")
    print(json.dumps({"run": str(run.path), **{k: m[k] for k in (
        "train_accuracy", "val_accuracy", "test_accuracy", "best_epoch", "train_seconds")}}))
    return 0


def _cmd_create(args: argparse.Namespace) -> int:
    from stateseer.rnn_models.run import create_model_run

    _check_out_dir(args.run)
    run = create_model_run(args.run, args.dataset, args.model, vocab=_read_vocab(args.vocab),
                           text_col=args.text_col, label_col=args.label_col,
                           tokenizer=args.tokenizer, seed=args.seed,
                           max_tokens=args.max_tokens, force=args.force,
                           expect_accuracy=args.expect_accuracy,
                           prefix_stride=args.prefix_stride)
    if args.colors:
        _set_colors(run.path, args.colors)
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
    from stateseer.core.imported import import_traces

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
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.run import ModelRun

    run = ModelRun(args.run)
    traces = record_run(run, splits=args.splits, layer=args.layer, dtype=args.dtype,
                        batch_size=args.batch_size, cluster=args.cluster,
                        shard_size=args.shard_size)
    if run.config.get("model", {}).get("kind") == "factory":  # no training wrote them
        run.update_metrics(**{f"{s}_accuracy": v["accuracy"]
                              for s, v in traces.meta["splits"].items()})
    print(json.dumps({"traces": str(traces.path), "splits": traces.meta["splits"]}))
    return 0


def _add_colors(p: argparse.ArgumentParser) -> None:
    p.add_argument("--colors", type=_colors_arg, metavar="NAME=#RRGGBB,...",
                   help="the classes' own colours in every view and export (e.g. a party's "
                   "or a sentiment convention: rotten=#d62728,fresh=#2ca02c; or colours "
                   "alone, in the class order); default: stateseer's scale; change them "
                   "later with `stateseer colors`")


def _cmd_colors(args: argparse.Namespace) -> int:
    if not args.clear and not args.colors:
        raise StateseerError("give the colours (NAME=#rrggbb,...) or --clear")
    colors = _set_colors(args.run, None if args.clear else args.colors)
    print(json.dumps({"run": args.run, "colors": colors}))
    return 0


def _add_colors_command(sub: Any) -> None:
    c = sub.add_parser("colors", help="set (or --clear) the colours of a run's classes")
    c.add_argument("run", help="run directory")
    c.add_argument("colors", nargs="?", type=_colors_arg, metavar="NAME=#RRGGBB,...",
                   help="rotten=#d62728,fresh=#2ca02c, or colours alone in the class order")
    c.add_argument("--clear", action="store_true", help="back to stateseer's scale")
    c.set_defaults(func=_cmd_colors)


def _add_train(sub: Any) -> None:
    t = sub.add_parser("train", help="train a recurrent classifier (LSTM, GRU, Elman, minGRU, "
                           "minLSTM, Mamba) into a run directory")
    _add_colors(t)
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
    _add_colors(c)
    c.add_argument("--prefix-stride", type=_positive_int, default=None, metavar="K",
                   help="a model read prefix by prefix (ClassifierAdapter): read every K-th "
                   "prefix and the last (long texts; a step between carries the last read "
                   "one); the run keeps it (default: every prefix, exact)")
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
                       "core/imported.py.")
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
