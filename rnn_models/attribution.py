"""Per-token attribution of a recurrent classifier's prediction, with Captum.

Three methods, all on the embedding layer (the input the recurrence reads):

``ig``
    Integrated gradients from a baseline (the all-zero embedding, which is ``<pad>``'s, or
    ``<unk>``'s embedding at every position) to the input's embeddings. Completeness
    holds up to Captum's *convergence delta* (``sum(attributions) − (f(x) − f(baseline))``),
    which is returned and shown.
``gxi``
    Gradient × input on the embeddings (one backward pass).
``occlusion``
    The drop in the target when one token's embedding is replaced by the baseline's (Captum's
    ``Occlusion`` with a one-token window, all windows in one batch).

The *target* is the predicted class's probability (``predicted``), or, ``contrastive``, the
logit of the predicted class minus that of the runner-up (or of a chosen class): "why this
class rather than that one". Token attributions sum into words, sentences or the segments
of a regular expression with :func:`aggregate`.

Any model in the protocol (:mod:`stateseer.rnn_models.protocol`) can be attributed: IG and
gradient × input call its ``embed(ids)`` and ``forward_from_embeddings(emb)`` (Captum's
``forward_func``); occlusion uses them too when present and otherwise replaces the token id
(``<pad>`` 0 or ``<unk>`` 1) and reads the recording forward pass ``trace``, so it works on
a model that only records.

On a GPU, cuDNN's RNN kernels cannot run backward in eval mode, so gradients are taken
with ``torch.backends.cudnn.flags(enabled=False)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn

from stateseer.core.errors import StateseerError
from stateseer.rnn_models.protocol import EMBEDDINGS, has, model_device, require

__all__ = ["METHODS", "TARGETS", "Attribution", "aggregate", "attribute", "segments"]

METHODS = ("ig", "gxi", "occlusion")
TARGETS = ("predicted", "contrastive")
BASELINES = ("pad", "unk")


@dataclass
class Attribution:
    """Attributions of one input.

    Attributes
    ----------
    tokens : list of str
    scores : ndarray of shape (n_tokens,)
        Positive = supports the target.
    method, target : str
    target_class : int
        The class whose probability (or contrast) is explained.
    contrast_class : int or None
    output : float
        The explained quantity for the input (probability or logit difference).
    baseline_output : float or None
        The same for the baseline (IG only).
    delta : float or None
        IG's convergence delta (Captum): ``sum(scores) − (output − baseline_output)``.
    """

    tokens: list[str]
    scores: np.ndarray
    method: str
    target: str
    target_class: int
    contrast_class: int | None = None
    output: float = 0.0
    baseline_output: float | None = None
    delta: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def relative_delta(self) -> float | None:
        """``|delta|`` over ``|output − baseline_output|`` (IG only)."""
        if self.delta is None or self.baseline_output is None:
            return None
        return abs(self.delta) / max(abs(self.output - self.baseline_output), 1e-12)


#: IG's completeness error (|delta| over |f(x) - f(baseline)|) above which the path is
#: refined where the explained quantity jumps (:func:`_refined_ig`)
IG_TOLERANCE = 0.05
#: the most points a refined path holds (gradients computed in batches of n_steps)
IG_MAX_STEPS = 2048


def _path_values(f, emb: Tensor, base: Tensor, alphas: np.ndarray, batch: int) -> np.ndarray:
    """``f`` at ``base + alpha (emb - base)`` for every alpha, in batches."""
    out = []
    with torch.no_grad():
        for a in range(0, len(alphas), batch):
            al = torch.as_tensor(alphas[a:a + batch], dtype=emb.dtype,
                                 device=emb.device)[:, None, None]
            out.append(f(base + al * (emb - base)).reshape(-1).cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def _refined_ig(ig, f, emb: Tensor, base: Tensor, n_steps: int, attr: Tensor,
                delta: float, change: float) -> tuple[Tensor, float]:
    """IG along a path refined where ``f`` jumps, when Gauss–Legendre's fixed nodes missed
    a jump (a long input that saturates a recurrent net flips its class within a
    thousandth of the path: 64 nodes summed to 0.00 of a change of 0.99).

    The path's grid starts at ``n_steps`` equal intervals; an interval over which ``f``
    changes by more than 1/``n_steps`` of the whole change is cut in eight, up to
    :data:`IG_MAX_STEPS` points. Captum's IG then integrates the gradients at the
    intervals' midpoints, weighted by their widths (``step_sizes_and_alphas``). The
    refined attribution is kept only where its convergence delta is smaller.
    """
    edges = np.linspace(0.0, 1.0, n_steps + 1)
    for _ in range(8):
        vals = _path_values(f, emb, base, edges, n_steps)
        jump = np.flatnonzero(np.abs(np.diff(vals)) > abs(change) / n_steps)
        if not jump.size or len(edges) + 7 * len(jump) > IG_MAX_STEPS:
            break
        edges = np.union1d(edges, np.concatenate(
            [np.linspace(edges[i], edges[i + 1], 9)[1:-1] for i in jump]))
    mids, widths = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    total = torch.zeros_like(emb)
    for a in range(0, len(mids), n_steps):  # the integral is a sum: batches add up
        part = ig._attribute((emb,), (base,), n_steps=len(mids[a:a + n_steps]),
                             step_sizes_and_alphas=(widths[a:a + n_steps].tolist(),
                                                    mids[a:a + n_steps].tolist()))
        total = total + part[0]
    refined = float(total.sum()) - change
    return (total, refined) if abs(refined) < abs(delta) else (attr, delta)


def _target_fn(model, target: str, cls: int, other: int | None):
    """The explained quantity as a function of embeddings (batch, time, features)."""
    if target == "predicted":
        return lambda e: torch.softmax(model.forward_from_embeddings(e), dim=-1)[:, cls]
    return lambda e: (lambda z: z[:, cls] - z[:, other])(model.forward_from_embeddings(e))


def attribute(model: nn.Module, ids: list[int] | np.ndarray, tokens: list[str], *,
              method: str = "ig", target: str = "predicted", contrast: int | None = None,
              baseline: str = "pad", n_steps: int = 64, unk_id: int = 1,
              pad_id: int | None = 0) -> Attribution:
    """Attribute one input's final prediction to its tokens.

    Parameters
    ----------
    model : a model in the protocol
        IG and ``gxi`` need ``embed`` and ``forward_from_embeddings``; occlusion needs only
        ``trace`` (see :mod:`stateseer.rnn_models.protocol`).
    ids : sequence of int, length n_tokens ≥ 1
        The input's token ids.
    tokens : list of str
        Their surface forms (returned with the scores).
    method : {'ig', 'gxi', 'occlusion'}
    target : {'predicted', 'contrastive'}
    contrast : int, optional
        The class to contrast with (default the runner-up).
    baseline : {'pad', 'unk'}
        What "absent" means for IG and occlusion: the all-zero embedding of ``<pad>``, or
        the embedding of ``<unk>`` (id 1) at every position. A model without ``embed`` is
        occluded by token id: ``<pad>`` (0) or ``<unk>`` (1).
    n_steps : int
        Integration steps of IG (Gauss–Legendre).
    unk_id, pad_id : int
        The vocabulary's ``<unk>`` and ``<pad>`` ids (``vocab.unk_id``, ``vocab.pad_id``;
        1 and 0 for built-in runs). Occlusion by id with ``baseline='pad'`` needs a
        ``<pad>`` id.

    Returns
    -------
    Attribution
    """
    if method not in METHODS:
        raise StateseerError(f"unknown attribution method {method!r}; choose one of "
                             f"{', '.join(METHODS)}")
    if target not in TARGETS:
        raise StateseerError(f"unknown attribution target {target!r}; choose one of "
                             f"{', '.join(TARGETS)}")
    if baseline not in BASELINES:
        raise StateseerError(f"unknown attribution baseline {baseline!r}; choose one of "
                             f"{', '.join(BASELINES)}")
    ids = np.asarray(ids, np.int64)
    if ids.ndim != 1 or len(ids) == 0:
        raise StateseerError("attribution needs a non-empty input; type at least one token")
    by_embedding = has(model, EMBEDDINGS)
    if method != "occlusion":
        name = "integrated gradients" if method == "ig" else "gradient × input"
        require(model, EMBEDDINGS, name, " or use method='occlusion'")
    was_training = getattr(model, "training", False)
    if isinstance(model, nn.Module):
        model.eval()
    try:
        ids_t = torch.as_tensor(ids, device=model_device(model))  # run where the model lives
        if not by_embedding:
            require(model, ("trace",), "occlusion")
            if baseline == "pad" and pad_id is None:
                raise StateseerError("the vocabulary has no '<pad>' token to occlude with; "
                                     "use baseline='unk'")
            return _occlude_ids(model, ids_t, tokens, target, contrast, baseline,
                                pad_id if baseline == "pad" else unk_id)
        return _by_embeddings(model, ids_t, tokens, method, target, contrast, baseline,
                              n_steps, unk_id)
    finally:
        if isinstance(model, nn.Module):
            model.train(was_training)


def _by_embeddings(model, ids: Tensor, tokens: list[str], method: str, target: str,
                   contrast: int | None, baseline: str, n_steps: int,
                   unk_id: int = 1) -> Attribution:
    """Captum's IG, gradient × input or occlusion on the model's embeddings."""
    from captum.attr import InputXGradient, IntegratedGradients, Occlusion

    with torch.no_grad():
        emb = model.embed(ids[None]).detach()
        logits = model.forward_from_embeddings(emb)[0]
        base = (torch.zeros_like(emb) if baseline == "pad" else
                model.embed(torch.full_like(ids, unk_id)[None]).detach())
    cls, other = _classes(torch.argsort(logits, descending=True).tolist(), target, contrast)
    f = _target_fn(model, target, cls, other)
    cudnn_off = torch.backends.cudnn.flags(enabled=False)
    with cudnn_off:
        baseline_out = delta = None
        if method == "ig":
            ig = IntegratedGradients(f)
            attr, d = ig.attribute(emb, baselines=base, n_steps=n_steps,
                                   method="gausslegendre", return_convergence_delta=True,
                                   internal_batch_size=n_steps)
            delta = float(d.reshape(-1)[0])
            with torch.no_grad():
                baseline_out, out = float(f(base)[0]), float(f(emb)[0])
            if abs(delta) > IG_TOLERANCE * max(abs(out - baseline_out), 1e-12):
                attr, delta = _refined_ig(ig, f, emb, base, n_steps, attr, delta,
                                          out - baseline_out)
        elif method == "gxi":
            attr = InputXGradient(f).attribute(emb.clone().requires_grad_(True))
        else:
            attr = Occlusion(f).attribute(emb, sliding_window_shapes=(1, emb.shape[2]),
                                          baselines=base,
                                          perturbations_per_eval=max(1, len(ids)))
        with torch.no_grad():
            out = float(f(emb)[0])
    if method == "occlusion":  # every cell of a one-token window holds that drop
        scores = attr[0][:, 0].detach().cpu().numpy().astype(np.float64)
    else:
        scores = attr[0].sum(dim=-1).detach().cpu().numpy().astype(np.float64)
    return Attribution(tokens=list(tokens), scores=scores, method=method, target=target,
                       target_class=cls, contrast_class=other, output=out,
                       baseline_output=baseline_out, delta=delta,
                       extra={"baseline": baseline})


def _classes(order: list[int], target: str, contrast: int | None) -> tuple[int, int | None]:
    """The explained class and, for a contrastive target, the one it is contrasted with."""
    cls, other = order[0], None
    if target == "contrastive":
        if len(order) < 2:
            raise StateseerError("a contrastive attribution needs at least two classes")
        other = order[1] if contrast is None else int(contrast)
        if not 0 <= other < len(order) or other == cls:
            raise StateseerError(f"contrast class {contrast} must be another class "
                                 f"than the prediction ({cls})")
    return cls, other


def _occlude_ids(model, ids: Tensor, tokens: list[str], target: str,
                 contrast: int | None, baseline: str, fill: int) -> Attribution:
    """Occlusion by token id for a model without embeddings: one batch, the input and
    the input with each token in turn replaced by the id ``fill`` (``<pad>`` or ``<unk>``)."""
    n = len(ids)
    batch = ids[None].repeat(n + 1, 1)
    batch[torch.arange(1, n + 1), torch.arange(n)] = fill
    with torch.no_grad():
        lengths = torch.full((n + 1,), n, dtype=torch.long, device=ids.device)
        _, proba = model.trace(batch, lengths)
        z = torch.log(proba[:, n - 1].clamp_min(1e-38))  # logits up to a constant per row
    cls, other = _classes(torch.argsort(z[0], descending=True).tolist(), target, contrast)
    f = torch.softmax(z, -1)[:, cls] if other is None else z[:, cls] - z[:, other]
    scores = (f[0] - f[1:]).cpu().numpy().astype(np.float64)
    return Attribution(tokens=list(tokens), scores=scores, method="occlusion", target=target,
                       target_class=cls, contrast_class=other, output=float(f[0]),
                       extra={"baseline": baseline, "by": "token id"})


# -- aggregation --------------------------------------------------------------------------
LEVELS = ("token", "word", "sentence", "regex")
MAX_PATTERN = 100     # characters of a user's delimiter pattern
MAX_DELIMITER = 16    # longer tokens are never delimiters (bounds regex backtracking)
_SENTENCE_END = re.compile(r"^[.!?]+$")


def segments(tokens: list[str], level: str = "token", *, joiner: str = " ",
             pattern: str | None = None) -> list[list[int]]:
    """Group token positions into segments.

    Parameters
    ----------
    tokens : list of str
    level : {'token', 'word', 'sentence', 'regex'}
        ``word`` joins tokens between whitespace tokens (character-level models; for word
        tokenisers every token is a word); ``sentence`` ends a segment after ``.``, ``!``
        or ``?``; ``regex`` ends a segment after every token that ``pattern`` matches in
        full (e.g. ``[,;.]`` for clauses). Patterns are at most 100 characters and only
        tokens of at most 16 characters are tried, so a pathological pattern cannot stall.
    joiner : str
        How the tokens were separated in the text (``""`` for characters).
    pattern : str, optional
        The delimiter regular expression for ``regex``.

    Returns
    -------
    list of list of int
        Consecutive, covering every position once.

    Examples
    --------
    >>> segments(["a", "b", ".", "c"], "sentence")
    [[0, 1, 2], [3]]
    >>> segments(list("ab cd"), "word", joiner="")
    [[0, 1, 2], [3, 4]]
    """
    n = len(tokens)
    if level == "token":
        return [[i] for i in range(n)]
    if level == "word":
        if joiner:
            return [[i] for i in range(n)]
        ends = {i for i, t in enumerate(tokens) if t.isspace()}
    elif level == "sentence":
        ends = {i for i, t in enumerate(tokens) if _SENTENCE_END.match(t.strip() or "x")}
    elif level == "regex":
        if not pattern:
            raise StateseerError("regex segments need a pattern, e.g. [,;.]")
        if len(pattern) > MAX_PATTERN:
            raise StateseerError(f"the delimiter pattern has {len(pattern)} characters; the "
                                 f"limit is {MAX_PATTERN} — shorten it")
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise StateseerError(f"invalid regular expression {pattern!r} ({exc}); fix "
                                 "it") from None
        ends = {i for i, t in enumerate(tokens)
                if len(t) <= MAX_DELIMITER and rx.fullmatch(t)}
    else:
        raise StateseerError(f"unknown segment level {level!r}; choose one of "
                             f"{', '.join(LEVELS)}")
    out, cur = [], []
    for i in range(n):
        cur.append(i)
        if i in ends:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def aggregate(scores: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Sum token scores per segment, shape (n_segments,).

    >>> aggregate(np.array([1.0, 2.0, -1.0]), [[0, 1], [2]]).tolist()
    [3.0, -1.0]
    """
    scores = np.asarray(scores, np.float64)
    if not groups:
        return np.zeros(0)
    seg = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    return np.bincount(seg, weights=scores[np.concatenate(groups)], minlength=len(groups))
