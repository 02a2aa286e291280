"""`stateseer repair --action dfr`: Deep Feature Reweighting (Kirichenko et al. 2023).
RUN's model keeps its body and only its last layer is fit again on the validation inputs
balanced over the culprit; nothing is retrained. Also: the re-headed model written as a
run of its own."""

from __future__ import annotations

import json
import shutil
from typing import Any

import numpy as np

from stateseer.app.workflows.repair_edits import _has_span, _inserted
from stateseer.app.workflows.retraining import _encoded, _moved_config
from stateseer.core.atomic import atomic_write, atomic_write_text
from stateseer.core.errors import StateseerError

__all__ = ["DFR_C", "DFR_C_FEW", "HEAD_REFITS"]




#: ``dfr``: the inverse strengths of the L2 penalty tried for the new last layer; the one
#: whose worst (class, carries the culprit) group does best on a held-out half of the
#: balanced inputs is kept (Kirichenko et al. 2023 tune theirs the same way, on half of
#: their validation set)
DFR_C = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)


#: ``dfr``'s penalty where the balanced inputs are too few to hold half of them out (a
#: class with a single validation input)
DFR_C_FEW = 1.0


#: the actions that refit only RUN's last layer (nothing is retrained, the data stay)
HEAD_REFITS = ("dfr",)


def _dfr(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    """Deep Feature Reweighting (Kirichenko et al. 2023): RUN's model keeps its body and
    only its last layer (``head``) is fit again, by an L2 logistic regression on what the
    frozen body makes of validation inputs balanced over the culprit
    (:func:`_balanced_inputs`: every class as often with the span as without it). The
    data set is returned as it is; the edits hold the new ``head`` (its ``weight`` and
    ``bias``), ``balanced_rows`` (inputs per class, with and without the culprit),
    ``features`` (what the head reads per input) and the penalty ``C`` chosen."""
    from torch import nn

    if f["kind"] != "shortcut":
        raise StateseerError("dfr balances a shortcut against the classes; for this "
                             "finding choose one of its other actions")
    model = src.load_model()
    if not isinstance(getattr(model, "head", None), nn.Linear):
        raise StateseerError(f"dfr refits the model's last layer, and {src.path}'s model has "
                             "no linear `head` to refit; choose counterfactual, augment or "
                             "jtt, which retrain it")
    toks, y, carry, pair = _balanced_inputs(ds, f, rng, src.truncate)
    vocab = src.vocab()
    x = _head_inputs(model, [vocab.encode(t) for t in toks])
    weight, bias, c = _fit_head(x, y, carry, pair, len(ds.classes), rng)
    per_class = np.bincount(y[carry == 1], minlength=len(ds.classes)).tolist()
    return ds, {"balanced_rows": {name: {"without": n, "with": n}
                                  for name, n in zip(ds.classes, per_class, strict=True)},
                "features": int(x.shape[1]), "C": c,
                "head": {"weight": weight.tolist(), "bias": bias.tolist()}}


def _balanced_inputs(ds: Any, f: dict, rng: np.random.Generator, limit: int | None
                     ) -> tuple[list[list[str]], np.ndarray, np.ndarray, np.ndarray]:
    """The validation inputs, as many of each class as of the rarest (drawn by ``rng``),
    each twice: with the culprit's span deleted (every token of it) and with it inserted
    whole at a random position (an input the model already reads it in counts as is), so
    that the span tells nothing of the class. Returns the inputs' tokens as the model reads
    them (``limit``: the run's cut), their classes, whether they carry the span (0, 1) and
    which validation input each came from.

    Raises
    ------
    StateseerError
        A class without validation inputs (one line).
    """
    val = np.asarray(ds.splits.get("val", np.zeros(0, np.int64)))
    labels = np.asarray(ds.labels)
    counts = np.bincount(labels[val], minlength=len(ds.classes))
    if not counts.min():
        raise StateseerError(f"dfr fits the last layer on validation inputs of every class "
                             f"and the run has none of {ds.classes[int(counts.argmin())]}; "
                             "choose counterfactual, augment or jtt")
    keep = np.sort(np.concatenate([rng.choice(val[labels[val] == k], int(counts.min()),
                                              replace=False) for k in range(len(counts))]))
    span = [str(w) for w in f["tokens"]]
    culprit = set(span)
    without = [[t for t in ds.tokens[i] if t not in culprit][:limit] for i in keep.tolist()]
    within = [ds.tokens[i][:limit] if _has_span(ds.tokens[i][:limit], span) else
              _inserted(ds.tokens[i], span, rng, limit) for i in keep.tolist()]
    n = len(keep)
    return ([*without, *within], np.tile(labels[keep], 2), np.repeat([0, 1], n),
            np.tile(np.arange(n), 2))


def _head_inputs(model: Any, seqs: list[np.ndarray]) -> np.ndarray:
    """What ``model``'s linear ``head`` reads for each encoded input: its input at the
    input's last token (zeros for an empty input: the head reads the zero initial state),
    shape (n, head inputs). The model runs in batches of similar length, as it does to
    predict, and the head's input is caught by a hook.

    Raises
    ------
    StateseerError
        The head applied to what it read is not the model's output (it is not the model's
        last layer alone; one line).
    """
    import torch

    from stateseer.rnn_models.batching import length_batches, pad_batch
    from stateseer.rnn_models.models import _last

    model.eval()
    head = model.head
    seen: list[torch.Tensor] = []
    hook = head.register_forward_hook(lambda _m, args, _out: seen.append(args[0]))
    out = np.zeros((len(seqs), head.in_features), np.float32)
    try:
        with torch.no_grad():
            for b in length_batches(np.array([len(q) for q in seqs]), 256, max_tokens=40000):
                ids, lengths = (torch.from_numpy(a) for a in pad_batch(seqs, b))
                seen.clear()
                logits = model(ids, lengths)
                x = next((t for t in reversed(seen) if t.dim() > 1), None)
                x = torch.zeros(len(b), head.in_features) if x is None else \
                    _last(x, lengths) if x.dim() == 3 else x
                x = torch.where((lengths == 0)[:, None], torch.zeros_like(x), x)
                if not torch.allclose(head(x), logits, rtol=1e-4, atol=1e-4):
                    raise StateseerError("the model's output is not its `head` applied to "
                                         "its last state, so dfr cannot refit it alone; "
                                         "choose counterfactual, augment or jtt")
                out[b] = x.numpy()
    finally:
        hook.remove()
    return out


def _fit_head(x: np.ndarray, y: np.ndarray, carry: np.ndarray, pair: np.ndarray,
              n_classes: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """An L2 logistic regression of the classes ``y`` on the features ``x`` (standardised;
    classes weighted equally) as a linear head: ``weight`` (n_classes, features), ``bias``
    and the ``C`` of :data:`DFR_C` whose worst (class, ``carry``) group is most often right
    on a held-out half of the inputs (both versions of a validation input, ``pair``, in
    the same half). Two classes: the one row of scores ``w`` becomes ``[-w/2, w/2]``."""
    from sklearn.linear_model import LogisticRegression

    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = (x - mu) / sd
    firsts = np.unique(pair)
    held = np.isin(pair, rng.choice(firsts, len(firsts) // 2, replace=False))
    group = y * 2 + carry

    def fit(c: float, rows: np.ndarray) -> Any:
        return LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(
            z[rows], y[rows])

    def worst(c: float) -> float:
        right = fit(c, ~held).predict(z[held]) == y[held]
        return min(float(right[group[held] == g].mean()) for g in np.unique(group[held]))

    c = DFR_C[int(np.argmax([worst(c) for c in DFR_C]))] if \
        len(np.unique(y[~held])) == n_classes else DFR_C_FEW
    clf = fit(c, np.ones(len(y), bool))
    weight = clf.coef_ / sd
    bias = clf.intercept_ - weight @ mu
    if n_classes == 2:
        weight, bias = np.concatenate([-weight, weight]) / 2, np.r_[-bias, bias] / 2
    return weight.astype(np.float32), bias.astype(np.float32), c


def _reheaded(src: Any, head: dict[str, list]) -> Any:
    """A copy of RUN's model with ``head``'s ``weight`` and ``bias`` as its last layer."""
    import copy

    import torch

    model = copy.deepcopy(src.load_model())
    with torch.no_grad():
        for name in ("weight", "bias"):
            p = getattr(model.head, name)
            p.copy_(torch.as_tensor(np.asarray(head[name]), dtype=p.dtype))
    return model


def _write_reheaded(src: Any, new: Any, head: dict[str, list]) -> None:
    """Write into ``new`` RUN's model with the last layer ``head`` as a run of its own:
    RUN's configuration (:func:`_moved_config`), vocabulary (and a checkpoint's
    tokenizer), ``model.pt`` whose every other tensor is RUN's, and ``metrics.json``:
    RUN's training figures beside the new model's accuracies."""
    import torch

    from stateseer.rnn_models.hf_mamba import TOKENIZER_DIR
    from stateseer.rnn_models.train import evaluate

    model = _reheaded(src, head)
    state = model.state_dict()
    atomic_write(new.model_path, lambda fh: torch.save(state, fh))
    shutil.copy2(src.vocab_path, new.vocab_path)
    if (src.path / TOKENIZER_DIR).is_dir():
        shutil.copytree(src.path / TOKENIZER_DIR, new.path / TOKENIZER_DIR)
    atomic_write_text(new.config_path, json.dumps(_moved_config(src, new.path), indent=2))
    ds, old = src.dataset(), src.metrics()
    accuracy = {}
    for split in ("train", "val", "test"):
        rows = np.asarray(ds.splits.get(split, np.zeros(0, np.int64)))
        accuracy[f"{split}_accuracy"] = evaluate(model, _encoded(src, ds, rows), np.asarray(
            ds.labels)[rows])[0] if len(rows) else float("nan")
    new.update_metrics(**{k: old[k] for k in ("best_epoch", "epochs_run", "train_seconds",
                                              "history") if k in old},
                       **accuracy, model_sha256=new.model_sha256())
