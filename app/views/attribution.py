"""Attribution strip: input segments shaded by how much they support the prediction."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from dash import html

from .colors import class_color

__all__ = ["attribution_note", "attribution_strip"]


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:.3f})"


def attribution_strip(tokens: Sequence[str], scores: Sequence[float],
                      groups: Sequence[Sequence[int]], classes: Sequence[str], *,
                      target_class: int, contrast_class: int | None = None,
                      intensity: float = 1.0, joiner: str = " ") -> html.Div:
    """Segments as chips shaded by their summed attribution.

    Positive scores (support for ``target_class``) take that class's colour; negative ones
    the contrast class's colour (or grey). The opacity is ``|score| / max|score|`` times
    ``intensity`` (capped at 1). Text is passed to Dash as text, never as HTML.

    Parameters
    ----------
    tokens : sequence of str
    scores : sequence of float, shape (n_segments,)
        Summed attribution per segment.
    groups : sequence of sequence of int
        Token positions of every segment.
    classes : sequence of str
    target_class, contrast_class : int
    intensity : float
    joiner : str
        How tokens are joined inside a segment ("" for character models).
    """
    s = np.asarray(scores, float)
    top = float(np.abs(s).max()) if len(s) else 0.0
    pos = class_color(target_class, len(classes))
    neg = class_color(contrast_class, len(classes)) if contrast_class is not None else (
        class_color(1 - target_class, 2) if len(classes) == 2 else "#888888")
    chips = []
    for j, (g, v) in enumerate(zip(groups, s, strict=True)):
        text = joiner.join(tokens[i] for i in g)
        shown = text if text.strip() else "␣" * len(text)
        a = min(1.0, abs(v) / top * max(intensity, 0.0)) if top > 0 else 0.0
        color = _rgba(pos if v >= 0 else neg, a)
        chips.append(html.Span(shown, className="attr-seg",
                               id={"type": "attr-seg", "index": j},
                               style={"background": color,
                                      "color": "#fff" if a > 0.6 else "#111"},
                               title=f"{text!r}: {v:+.4f}"))
    return html.Div(chips, className="attr-strip")


def attribution_note(att, classes: Sequence[str]) -> str:
    """One line: what was explained, and IG's completeness check."""
    what = (f"P({classes[att.target_class]})" if att.target == "predicted" else
            f"logit({classes[att.target_class]}) − logit({classes[att.contrast_class]})")
    names = {"ig": "integrated gradients", "gxi": "gradient × input",
             "occlusion": "occlusion"}
    line = f"{names[att.method]} of {what} = {att.output:.3f}"
    if att.delta is not None:
        total = att.output - att.baseline_output
        name = "<unk>" if att.extra.get("baseline") == "unk" else "<pad>"
        line += (f" · baseline (all-{name} embeddings) {att.baseline_output:.3f} · completeness:"
                 f" Σ attributions = {total + att.delta:+.4f} vs f(x) − f(baseline) = "
                 f"{total:+.4f}, convergence delta {att.delta:+.1e}")
    return line
