"""Attribution: how much each token (word, sentence, regex segment) of the trace on
display supports the prediction, by integrated gradients, gradient × input or occlusion,
shown as a shaded strip with a completeness check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import Input, Output, dcc, html

from stateseer.abstraction.colors import ClassColors
from stateseer.app.explorer import ids
from stateseer.app.explorer.page import box, model_message
from stateseer.app.explorer.view import Callback, View
from stateseer.app.explorer.views.core import active_of, shown_token, visible_token
from stateseer.core.errors import StateseerError

__all__ = ["VIEW", "attribution", "attribution_note", "attribution_strip"]


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:.3f})"


def attribution_strip(tokens: Sequence[str], scores: Sequence[float],
                      groups: Sequence[Sequence[int]], classes: Sequence[str], *,
                      target_class: int, contrast_class: int | None = None,
                      intensity: float = 1.0, joiner: str = " ",
                      palette: ClassColors | None = None) -> html.Div:
    """Segments as chips shaded by their summed attribution.

    Positive scores (support for ``target_class``) take that class's colour; negative ones
    the contrast class's colour (or grey). The opacity is ``|score| / max|score|`` times
    ``intensity`` (capped at 1). A long token is cut with "…"
    (:func:`~stateseer.app.explorer.views.core.shown_token`; the chip's tooltip names it
    whole). Text is passed to Dash as text, never as HTML.

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
    pal = palette or ClassColors(len(classes))
    pos = pal.solid(target_class)
    neg = pal.solid(contrast_class) if contrast_class is not None else (
        pal.solid(1 - target_class) if len(classes) == 2 else "#888888")
    chips = []
    for j, (g, v) in enumerate(zip(groups, s, strict=True)):
        text = joiner.join(tokens[i] for i in g)
        shown = joiner.join(shown_token(tokens[i]) for i in g) if text.strip() \
            else visible_token(text)
        a = min(1.0, abs(v) / top * max(intensity, 0.0)) if top > 0 else 0.0
        color = _rgba(pos if v >= 0 else neg, a)
        chips.append(html.Span(shown, className="attr-seg",
                               id=ids.attr_seg(j),
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


def _controls() -> html.Div:
    return html.Div([
        html.B("Attribution "),
        box(dcc.Dropdown(id=ids.ATTR_METHOD, clearable=False, value="ig", style={"width": 190},
                     options=[{"label": "integrated gradients", "value": "ig"},
                              {"label": "gradient × input", "value": "gxi"},
                              {"label": "occlusion", "value": "occlusion"},
                              {"label": "off", "value": "off"}]), 190),
        dcc.RadioItems(id=ids.ATTR_TARGET, inline=True, value="predicted",
                       options=[{"label": " predicted class ", "value": "predicted"},
                                {"label": " vs runner-up", "value": "contrastive"}]),
        box(dcc.Dropdown(id=ids.ATTR_LEVEL, clearable=False, value="token", style={"width": 110},
                     options=["token", "word", "sentence", "regex"]), 110),
        box(dcc.Dropdown(id=ids.ATTR_BASELINE, clearable=False, value="pad", style={"width": 150},
                     options=[{"label": "baseline <pad>", "value": "pad"},
                              {"label": "baseline <unk>", "value": "unk"}]), 150),
        dcc.Input(id=ids.ATTR_REGEX, type="text", placeholder="delimiter regex, e.g. [,;.]",
                  debounce=True, style={"width": 150}),
        html.Label(["intensity", dcc.Slider(id=ids.ATTR_INTENSITY, min=0.25, max=3,
                                            step=0.25, value=1, marks=None,
                                            tooltip={"placement": "bottom"})],
                   className="intensity"),
    ], className="attr-controls")


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    return {"trace": html.Div([_controls(), html.Div(id=ids.ATTR_STRIP),
                               html.Div(id=ids.ATTR_NOTE, className="attr-note")],
                              id=ids.ATTRIBUTION_PANEL, className="attribution-panel")}


def attribution(ctx, active, method, target, level, regex, intensity, baseline):
    """The strip and its note for the trace on display (nothing when "off")."""
    from stateseer.rnn_models.attribution import aggregate, segments

    tr, _ = active_of(active)
    if tr is None or method == "off":
        return None, ""
    if not tr.tokens:
        return None, "The input is empty: nothing to attribute."
    joiner = ctx.data.joiner
    try:
        att = ctx.models.attribution(tr, method, target, baseline or "pad")
        groups = segments(list(tr.tokens), level or "token", joiner=joiner, pattern=regex)
    except StateseerError as exc:
        return None, model_message(exc)
    scores = aggregate(att.scores, groups)
    strip = attribution_strip(tr.tokens, scores, groups, ctx.data.classes,
                              target_class=att.target_class,
                              contrast_class=att.contrast_class,
                              intensity=float(intensity or 1), joiner=joiner,
                              palette=ctx.data.palette)
    return strip, attribution_note(att, ctx.data.classes)


VIEW = View(
    name="attribution", presets=("baseline",), layout=layout, ids=(ids.ATTRIBUTION_PANEL,),
    callbacks=(
        Callback(attribution, [Output(ids.ATTR_STRIP, "children"),
                               Output(ids.ATTR_NOTE, "children")],
                 [Input(ids.ACTIVE_TRACE, "data"), Input(ids.ATTR_METHOD, "value"),
                  Input(ids.ATTR_TARGET, "value"), Input(ids.ATTR_LEVEL, "value"),
                  Input(ids.ATTR_REGEX, "value"), Input(ids.ATTR_INTENSITY, "value"),
                  Input(ids.ATTR_BASELINE, "value")]),
    ))
