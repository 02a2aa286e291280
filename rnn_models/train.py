"""Training: Adam, early stopping on validation accuracy, seeded and deterministic on CPU.

``train_run`` writes a complete run directory (``config.json``, ``model.pt``,
``vocab.json``, ``metrics.json``). For formal languages (one token per symbol) the loss
is taken on the label of *every prefix* (known from the grammar, or from the data when
each prefix is itself a labelled training string), which makes small RNNs learn the exact
automaton in seconds; natural-language data is trained on the final label only.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .batching import length_batches, pad_batch
from .datasets import TextDataset, load_dataset
from .errors import DataError
from .models import ARCHS, RNNClassifier
from .run import Run, atomic_write_text, data_section, sha256_file
from .tokenizers import Vocab

__all__ = ["DEFAULTS", "TrainConfig", "evaluate", "train_run"]

IGNORE = -100

DEFAULTS: dict[str, dict[str, Any]] = {
    "text": dict(embed=128, hidden=128, layers=1, dropout=0.4, epochs=12, batch_size=64,
                 lr=2e-3, patience=3, min_freq=2, weight_decay=0.0),
    "formal": dict(embed=8, hidden=32, layers=1, dropout=0.0, epochs=60, batch_size=64,
                   lr=1e-2, patience=8, min_freq=1, weight_decay=0.0),
}


@dataclass
class TrainConfig:
    """Everything ``stateseer train`` needs; ``None`` means the default for the data kind."""

    dataset: str
    arch: str = "lstm"
    embed: int | None = None
    hidden: int | None = None
    layers: int | None = None
    dropout: float | None = None
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    patience: int | None = None
    min_freq: int | None = None
    weight_decay: float | None = None
    max_vocab: int | None = 30000
    seed: int = 0
    state: str = "h"
    prefix_loss: str = "auto"
    tokenizer: str = "word"
    text_col: str = "text"
    label_col: str = "label"
    max_tokens: int | None = 2000
    extra: dict[str, Any] = field(default_factory=dict)

    def resolve(self, ds: TextDataset) -> dict[str, Any]:
        kind = "text" if ds.tokenizer == "word" else "formal"
        out = dict(DEFAULTS[kind])
        for k in out:
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        out["kind"] = kind
        return out


def _prefix_targets(ds: TextDataset, idx: np.ndarray, mode: str) -> list[np.ndarray] | None:
    """Per-prefix labels (length n+1, IGNORE where unknown) for rows ``idx``, or None."""
    if mode == "off" or (mode == "auto" and ds.tokenizer == "word"):
        return None
    if ds.grammar is not None:
        from .formal import GRAMMARS

        dfa = GRAMMARS[ds.grammar].dfa
        texts = [ds.texts[i] for i in idx]
        sym, lengths = dfa.encode(texts)
        lab = dfa.prefix_labels(sym, lengths).astype(np.int64)
        return [lab[j, : lengths[j] + 1] for j in range(len(idx))]
    known = {tuple(ds.tokens[i]): int(ds.labels[i]) for i in idx}
    out = []
    for i in idx:
        toks = ds.tokens[i]
        out.append(np.array([known.get(tuple(toks[:t]), IGNORE) for t in range(len(toks) + 1)],
                            dtype=np.int64))
    if mode == "auto" and sum(int((o[:-1] != IGNORE).sum()) for o in out) == 0:
        return None
    return out


@torch.no_grad()
def evaluate(model: RNNClassifier, seqs: list[np.ndarray], labels: np.ndarray,
             batch_size: int = 256) -> tuple[float, np.ndarray]:
    """Accuracy and predictions (n,) of ``model`` on encoded sequences."""
    was_training = model.training
    model.eval()
    pred = np.empty(len(seqs), dtype=np.int64)
    for b in length_batches(np.array([len(s) for s in seqs]), batch_size, max_tokens=40000):
        ids, lengths = pad_batch(seqs, b)
        pred[b] = model(torch.from_numpy(ids), torch.from_numpy(lengths)).argmax(-1).numpy()
    model.train(was_training)
    acc = float((pred == labels).mean()) if len(labels) else float("nan")
    return acc, pred


def train_run(
    cfg: TrainConfig,
    out: str | Path,
    *,
    force: bool = False,
    progress: bool = True,
    dataset: TextDataset | None = None,
) -> Run:
    """Train a classifier and write the run directory ``out``.

    Parameters
    ----------
    cfg : TrainConfig
    out : str or Path
        Run directory; an existing run is kept unless ``force``.
    force : bool
    progress : bool
        Show a tqdm progress bar on stderr.
    dataset : TextDataset, optional
        Use this data set instead of loading ``cfg.dataset`` (for notebooks and tests).

    Returns
    -------
    Run
    """
    if cfg.arch not in ARCHS:
        raise DataError(f"unknown --arch {cfg.arch!r}; choose one of: {', '.join(ARCHS)}")
    if cfg.prefix_loss not in ("auto", "on", "off"):
        raise DataError(f"--prefix-loss must be auto, on or off, not {cfg.prefix_loss!r}")
    run = Run(out)
    run.require_new(force)
    ds = dataset or load_dataset(
        cfg.dataset, text_col=cfg.text_col, label_col=cfg.label_col, tokenizer=cfg.tokenizer,
        seed=cfg.seed, max_tokens=cfg.max_tokens,
    )
    hp = cfg.resolve(ds)
    for split in ("train", "val"):
        if len(ds.splits[split]) == 0:
            raise DataError(f"the {split} split of {ds.name!r} is empty; add rows or drop 'split'")

    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    tr, va, te = (ds.splits[s] for s in ("train", "val", "test"))
    vocab = Vocab.build([ds.tokens[i] for i in tr], min_freq=hp["min_freq"],
                        max_size=cfg.max_vocab)
    seqs = [vocab.encode(t) for t in ds.tokens]
    labels = ds.labels
    prefix = _prefix_targets(ds, tr, cfg.prefix_loss)

    model = RNNClassifier(cfg.arch, len(vocab), len(ds.classes), embed=hp["embed"],
                          hidden=hp["hidden"], layers=hp["layers"], dropout=hp["dropout"],
                          state=cfg.state)
    opt = torch.optim.Adam(model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE)
    tr_seqs = [seqs[i] for i in tr]
    tr_lengths = np.array([len(s) for s in tr_seqs])
    va_seqs, te_seqs = [seqs[i] for i in va], [seqs[i] for i in te]

    best: dict[str, Any] = {"val_accuracy": -1.0, "loss": np.inf, "epoch": 0, "state": None}
    history = []
    t0 = time.perf_counter()
    if progress:
        from tqdm.auto import tqdm
    else:  # tqdm.auto warns in notebooks without ipywidgets even when disabled
        from tqdm.std import tqdm

    bar = tqdm(range(1, hp["epochs"] + 1), desc=f"train {cfg.arch} on {ds.name}",
               disable=not progress, unit="epoch")
    model.train()
    for epoch in bar:
        total, n_batches = 0.0, 0
        for b in length_batches(tr_lengths, hp["batch_size"], rng=rng):
            ids_np, len_np = pad_batch(tr_seqs, b)
            ids, lengths = torch.from_numpy(ids_np), torch.from_numpy(len_np)
            if prefix is not None:
                tgt = np.full((len(b), ids.shape[1] + 1), IGNORE, dtype=np.int64)
                mask = np.arange(tgt.shape[1]) <= len_np[:, None]
                tgt[mask] = np.concatenate([prefix[i] for i in b])
                steps = model.step_logits(ids) if ids.shape[1] else model.head.bias[None, None]
                init = model.head.bias.expand(len(b), 1, -1)
                logits = torch.cat([init, steps.expand(len(b), -1, -1)], dim=1)
                loss = loss_fn(logits.reshape(-1, logits.shape[-1]),
                               torch.from_numpy(tgt).reshape(-1))
            else:
                loss = loss_fn(model(ids, lengths), torch.from_numpy(labels[tr[b]]))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            total += loss.item()
            n_batches += 1
        val_acc, _ = evaluate(model, va_seqs, labels[va])
        history.append({"epoch": epoch, "loss": total / max(n_batches, 1),
                        "val_accuracy": val_acc})
        bar.set_postfix(loss=f"{total / max(n_batches, 1):.4f}", val_acc=f"{val_acc:.4f}")
        loss_avg = history[-1]["loss"]
        if val_acc > best["val_accuracy"] or (
            val_acc == best["val_accuracy"] and loss_avg < best["loss"]
        ):  # ties go to the better-fitted model
            best = {"val_accuracy": val_acc, "loss": loss_avg, "epoch": epoch,
                    "state": copy.deepcopy(model.state_dict())}
        if epoch - best["epoch"] >= hp["patience"]:
            break
        if hp["kind"] == "formal" and val_acc == 1.0 and loss_avg < 1e-3:
            break
    bar.close()
    train_seconds = time.perf_counter() - t0
    model.load_state_dict(best["state"])
    model.eval()

    train_acc, _ = evaluate(model, tr_seqs, labels[tr])
    val_acc, _ = evaluate(model, va_seqs, labels[va])
    test_acc, _ = evaluate(model, te_seqs, labels[te]) if len(te) else (float("nan"), None)

    run.path.mkdir(parents=True, exist_ok=True)
    # A retrained model invalidates anything derived from the old one.
    for stale in (run.traces_dir, run.abstraction_dir):
        if stale.exists():
            import shutil

            shutil.rmtree(stale)
    vocab.save(run.vocab_path)
    tmp = run.model_path.with_suffix(".pt.tmp")
    torch.save(model.state_dict(), tmp)
    tmp.replace(run.model_path)
    config = {
        "format": "stateseer.run", "version": 1,
        "data": data_section(ds, text_col=cfg.text_col, label_col=cfg.label_col,
                             seed=cfg.seed, max_tokens=cfg.max_tokens),
        "model": {"arch": cfg.arch, "vocab_size": len(vocab), "n_classes": len(ds.classes),
                  "embed": hp["embed"], "hidden": hp["hidden"], "layers": hp["layers"],
                  "state": cfg.state},
        "training": {**{k: hp[k] for k in ("dropout", "epochs", "batch_size", "lr", "patience",
                                            "min_freq", "weight_decay")},
                     "prefix_loss": prefix is not None, "optimizer": "adam",
                     "max_vocab": cfg.max_vocab, "seed": cfg.seed, "torch": torch.__version__},
        "config": asdict(cfg),
    }
    atomic_write_text(run.config_path, json.dumps(config, indent=2))
    metrics = {
        "train_accuracy": train_acc, "val_accuracy": val_acc, "test_accuracy": test_acc,
        "best_epoch": best["epoch"], "epochs_run": len(history), "train_seconds": train_seconds,
        "model_sha256": sha256_file(run.model_path), "history": history,
    }
    if run.metrics_path.exists():
        run.metrics_path.unlink()
    run.update_metrics(**metrics)
    return run
