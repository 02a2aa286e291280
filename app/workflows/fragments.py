"""HTML fragments of one input's trace: token chips coloured by the running prediction
with their states, and the probability chart as inline SVG (pure strings; used by the
exported pages, :mod:`~stateseer.app.workflows.html_export`, and by a trace's
``_repr_html_`` in a notebook)."""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from stateseer.abstraction.colors import ClassColors, text_color_on

__all__ = ["probability_svg", "token_chips", "trace_fragment"]


def probability_svg(proba: np.ndarray, tokens: list[str], classes: list[str], width: int = 900,
                    height: int = 260, *, palette: ClassColors | None = None) -> str:
    """The per-token probability of each class as an inline SVG line chart."""
    pal = palette or ClassColors(len(classes))
    n, pad = len(tokens), 36
    xs = [pad + (width - 2 * pad) * (i / max(n, 1)) for i in range(n + 1)]

    def y(p: float) -> float:  # the bottom 80 px hold the tokens, written at a slant
        return 10 + (height - 90) * (1 - p)

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' "
             f"width='{width}' height='{height}' style='max-width:100%;height:auto' "
             f"class='chart' id='chart' role='img' aria-label='running prediction'>",
             f"<line x1='{pad}' y1='{y(0.5):.1f}' x2='{width - pad}' y2='{y(0.5):.1f}' "
             "stroke='#ccc' stroke-dasharray='4 3'/>"]
    for k, name in enumerate(classes):
        color = pal.solid(k)
        pts = " ".join(f"{xs[i]:.1f},{y(float(p)):.1f}" for i, p in enumerate(proba[:, k]))
        parts.append(f"<polyline fill='none' stroke='{color}' stroke-width='2' "
                     f"points='{pts}'><title>{html.escape(name)}</title></polyline>")
        parts.append(f"<text x='{width - pad + 4}' y='{y(float(proba[-1, k])) + 4:.1f}' "
                     f"font-size='11' fill='{color}'>{html.escape(name)}</text>")
    if n == 0:  # an empty input: its one prediction, the initial state's, as dots
        for k, name in enumerate(classes):
            parts.append(f"<circle cx='{xs[0]:.1f}' cy='{y(float(proba[0, k])):.1f}' r='4' "
                         f"fill='{pal.solid(k)}'><title>{html.escape(name)} "
                         f"{float(proba[0, k]):.2f}</title></circle>")
    for i, t in enumerate(tokens, 1):
        parts.append(f"<text x='{xs[i]:.1f}' y='{height - 72}' font-size='10' "
                     f"text-anchor='end' transform='rotate(-45 {xs[i]:.1f} {height - 72})'>"
                     f"{html.escape(t[:14])}</text>")
    return "".join(parts) + "</svg>"


def token_chips(tr: Any, classes: list[str], *, palette: ClassColors | None = None) -> str:
    """A trace's tokens as HTML chips coloured by the running prediction, each with the
    abstract state after it (a record without states shows none).

    Parameters
    ----------
    tr : TraceRecord
    classes : list of str
    palette : ClassColors, optional
        The run's class colours (default: stateseer's scale).
    """
    pal = palette or ClassColors(len(classes))
    if not tr.tokens:  # an empty input: a trace of one state, the initial one
        p = tr.initial_proba
        color = pal.mix(p) if len(classes) == 2 else pal.solid(int(np.argmax(p)))
        state = f"<span class='st'>s{tr.states[0]}</span>" if tr.has_states else ""
        return (f"<span class='tok empty' style='background:{color};color:"
                f"{text_color_on(color)}' title='{html.escape(_proba_text(p, classes))}'>"
                f"(empty input){state}</span>")
    chips = []
    for i, tok in enumerate(tr.tokens):
        color = pal.mix(tr.proba[i]) if len(classes) == 2 else \
            pal.solid(int(np.argmax(tr.proba[i])))
        cls = "tok" + ("" if tr.known[i] else " unk")
        tip = html.escape(_proba_text(tr.proba[i], classes))
        state = f"<span class='st'>s{tr.states[i + 1]}</span>" if tr.has_states else ""
        chips.append(f"<span class='{cls}' style='background:{color};color:"
                     f"{text_color_on(color)}' title='{tip}'>{html.escape(tok)}{state}</span>")
    return "".join(chips)


def trace_fragment(tr: Any, classes: list[str] | None = None, *,
                   palette: ClassColors | None = None) -> str:
    """A trace as an HTML fragment (a notebook cell's output): the chips and the chart."""
    classes = classes or [f"class {k}" for k in range(len(tr.final_proba or tr.proba[0]))]
    proba = np.vstack([np.asarray(tr.initial_proba, float)[None],
                       np.asarray(tr.proba, float).reshape(-1, len(classes))])
    chart = probability_svg(proba, list(tr.tokens), classes, width=640, height=220,
                            palette=palette)
    head = (f"<div style='font:13px sans-serif;color:#555'>{len(tr.tokens)} tokens · "
            f"predicted {html.escape(classes[tr.prediction])}"
            + (f" · label {html.escape(classes[tr.label])}" if tr.label is not None
               and tr.label >= 0 else "") + "</div>")
    return ("<div class='stateseer-trace'><style>.stateseer-trace .tok{display:inline-block;"
            "margin:2px;padding:2px 5px;border-radius:4px;font:14px sans-serif}"
            ".stateseer-trace .st{display:block;font-size:10px;opacity:.75;"
            "text-align:center}</style>"
            f"{head}<div>{token_chips(tr, classes, palette=palette)}</div>"
            f"{chart}</div>")


def _proba_text(p: Any, classes: list[str]) -> str:
    return ", ".join(f"{c} {float(x):.2f}" for c, x in zip(classes, p, strict=True))


