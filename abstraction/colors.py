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

from collections.abc import Sequence

import numpy as np

__all__ = ["CATEGORICAL", "class_color", "mix_color", "text_color_on"]

CATEGORICAL = ("#4c78a8", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6",
               "#9d755d", "#bab0ac", "#dbdb8d", "#8db600", "#6b6ecf", "#882d17", "#a1caf1",
               "#393b79", "#b3446c", "#637939", "#2b3d26", "#636363", "#e377c2")
_NEG = np.array([214, 39, 40])     # class 0 (e.g. rotten / reject)
_MID = np.array([247, 247, 247])
_POS = np.array([31, 119, 180])    # class 1 (e.g. fresh / accept)


def _hex(rgb: np.ndarray) -> str:
    return "#" + "".join(f"{round(float(c)):02x}" for c in rgb)


def mix_color(prediction: Sequence[float]) -> str:
    """Colour of a prediction: diverging red–white–blue for two classes (by P(class 1)),
    else the palette colour of the argmax class blended toward white as confidence falls
    to chance."""
    p = np.asarray(prediction, dtype=float)
    if len(p) == 2:
        t = float(np.clip(p[1], 0, 1))
        rgb = _NEG + (_MID - _NEG) * (t / 0.5) if t < 0.5 else _MID + (_POS - _MID) * (
            (t - 0.5) / 0.5)
        return _hex(rgb)
    k, n = int(p.argmax()), len(p)
    base = np.array([int(CATEGORICAL[k % len(CATEGORICAL)][i : i + 2], 16) for i in (1, 3, 5)])
    t = min(1.0, max(0.0, (float(p.max()) - 1 / n) * n / max(n - 1, 1)))
    return _hex(_MID + (base - _MID) * (0.25 + 0.75 * t))  # never quite white: the class shows


def class_color(k: int, n_classes: int) -> str:
    """Solid colour of class ``k``."""
    if n_classes == 2:
        return _hex(_NEG if k == 0 else _POS)
    return CATEGORICAL[k % len(CATEGORICAL)]


def text_color_on(hex_color: str) -> str:
    """Black or white, whichever reads better on ``hex_color``."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"
