"""The one colour scale of stateseer: diverging for two classes, a 20-colour qualitative
palette otherwise.

The DOT export (:meth:`stateseer.abstraction.automata.fsm.FSM.to_dot`) and the explorer's views
colour a
state by its mean prediction with :func:`mix_color`, so a state looks the same in a
rendered graph and in the browser. (``app`` imports it from here; ``abstraction`` never
imports ``app``.) The palette (:data:`CATEGORICAL`) keeps every two of its 20 colours
apart by CIELAB ΔE ≥ 24 and each away from the explorer's orange path, purple compare
path, black selection and white (``stateseer.app.explorer.palette`` checks it); classes beyond 20
repeat it.

Examples
--------
>>> mix_color([1.0, 0.0]), mix_color([0.5, 0.5]), mix_color([0.0, 1.0])
('#d62728', '#f7f7f7', '#1f77b4')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stateseer.abstraction.errors import AbstractionError

__all__ = ["CATEGORICAL", "ClassColors", "class_color", "mix_color", "parse_colors",
           "run_palette", "text_color_on"]

CATEGORICAL = ("#4c78a8", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6",
               "#9d755d", "#bab0ac", "#dbdb8d", "#8db600", "#6b6ecf", "#882d17", "#a1caf1",
               "#393b79", "#b3446c", "#637939", "#2b3d26", "#636363", "#e377c2")
_NEG = np.array([214, 39, 40])     # class 0 (e.g. rotten / reject)
_MID = np.array([247, 247, 247])
_POS = np.array([31, 119, 180])    # class 1 (e.g. fresh / accept)


def _hex(rgb: np.ndarray) -> str:
    return "#" + "".join(f"{round(float(c)):02x}" for c in rgb)


def _rgb(hex_color: str) -> np.ndarray:
    return np.array([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)])


HEX = re.compile(r"#[0-9a-fA-F]{6}")


@dataclass(frozen=True)
class ClassColors:
    """The colour of each class: stateseer's scale, or a run's own (``--colors``).

    Two classes get a diverging scale from class 0's colour through near-white to class
    1's (by P(class 1)); more get each class's colour, blended toward white as the
    prediction's confidence falls to chance. ``own`` gives a class its own colour
    (``None``: the default one), e.g. a party's or a sentiment convention's.

    Examples
    --------
    >>> ClassColors(2).mix([0.5, 0.5]), ClassColors(2, ("#00aa00", None)).solid(0)
    ('#f7f7f7', '#00aa00')
    """

    n_classes: int
    own: tuple[str | None, ...] = ()

    def solid(self, k: int) -> str:
        """Solid colour of class ``k``."""
        if k < len(self.own) and self.own[k]:
            return str(self.own[k])
        if self.n_classes == 2:
            return _hex(_NEG if k == 0 else _POS)
        return CATEGORICAL[k % len(CATEGORICAL)]

    def mix(self, prediction: Sequence[float]) -> str:
        """Colour of a prediction (one probability per class)."""
        p = np.asarray(prediction, dtype=float)
        if len(p) == 2:
            lo, hi = _rgb(self.solid(0)), _rgb(self.solid(1))
            t = float(np.clip(p[1], 0, 1))
            rgb = lo + (_MID - lo) * (t / 0.5) if t < 0.5 else _MID + (hi - _MID) * (
                (t - 0.5) / 0.5)
            return _hex(rgb)
        k, n = int(p.argmax()), len(p)
        base = _rgb(self.solid(k))
        t = min(1.0, max(0.0, (float(p.max()) - 1 / n) * n / max(n - 1, 1)))
        return _hex(_MID + (base - _MID) * (0.25 + 0.75 * t))  # never quite white

    @classmethod
    def of(cls, classes: Sequence[str], colors: Mapping[str, str] | None) -> ClassColors:
        """The colours of ``classes`` with a run's ``colors`` (class name → ``#rrggbb``,
        as ``config.json`` keeps them); an entry naming no class is refused."""
        colors = dict(colors or {})
        unknown = sorted(set(colors) - set(classes))
        bad = sorted(v for v in map(str, colors.values()) if not HEX.fullmatch(v))
        if unknown or bad:
            raise AbstractionError(
                "class colours must name classes of the run and be #rrggbb colours: "
                + "; ".join([f"no class {u!r} (classes: {', '.join(classes)})"
                             for u in unknown[:3]] + [f"{b[:20]!r} is not #rrggbb"
                                                      for b in bad[:3]]))
        return cls(len(classes), tuple(colors.get(c) for c in classes))


def parse_colors(text: str, classes: Sequence[str]) -> dict[str, str]:
    """``--colors`` as class name → colour: ``rotten=#d62728,fresh=#2ca02c``, or colours
    alone in the class order (``#d62728,#2ca02c``).

    >>> parse_colors("fresh=#2CA02C", ["rotten", "fresh"])
    {'fresh': '#2ca02c'}
    >>> parse_colors("#111111,#222222", ["a", "b"])
    {'a': '#111111', 'b': '#222222'}
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if parts and all("=" not in p for p in parts):
        if len(parts) != len(classes):
            raise AbstractionError(f"--colors gives {len(parts)} colours for "
                                   f"{len(classes)} classes ({', '.join(classes)}); give one "
                                   "per class, or NAME=#rrggbb pairs")
        pairs = list(zip(classes, parts, strict=True))
    else:
        pairs = [tuple(s.strip() for s in p.partition("=")[::2]) for p in parts]
    out = {name: col.lower() for name, col in pairs}
    ClassColors.of(classes, out)  # refused in one line when wrong
    return out


def run_palette(config: Mapping[str, object], classes: Sequence[str]) -> ClassColors:
    """The class colours of a run: ``config.json``'s ``colors`` (class name → ``#rrggbb``,
    written by ``--colors``), else stateseer's scale."""
    colors = config.get("colors")
    if colors is not None and not isinstance(colors, Mapping):
        raise AbstractionError("config.json's 'colors' must map class names to #rrggbb "
                               "colours; set them again with --colors")
    return ClassColors.of(classes, colors)


def mix_color(prediction: Sequence[float]) -> str:
    """Colour of a prediction on stateseer's own scale (:meth:`ClassColors.mix`):
    diverging red–white–blue for two classes (by P(class 1)), else the palette colour of
    the argmax class blended toward white as confidence falls to chance."""
    return ClassColors(len(prediction)).mix(prediction)


def class_color(k: int, n_classes: int) -> str:
    """Solid colour of class ``k`` on stateseer's own scale."""
    return ClassColors(n_classes).solid(k)


def text_color_on(hex_color: str) -> str:
    """Black or white, whichever reads better on ``hex_color``."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"
