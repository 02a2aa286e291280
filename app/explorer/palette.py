"""Class colours of the explorer: :mod:`abstraction.colors` for two classes (the diverging
red–white–blue scale), a qualitative palette of 20 colours for more.

The palette starts with :data:`abstraction.colors.CATEGORICAL` less its orange (the
selected path is drawn orange, :data:`PATH_COLOR`) and adds colours chosen so that every
two of the 20 differ by CIELAB ΔE ≥ 24, and each differs from the path, compare and
selection colours and from the neutral white by ΔE ≥ 25 (:func:`delta_e`). Classes beyond
20 repeat it.

Examples
--------
>>> class_color(0, 4), class_color(1, 4), mix_color([0.0, 0.0, 1.0, 0.0])
('#4c78a8', '#54a24b', '#e45756')
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from abstraction import colors as _scale

__all__ = ["COMPARE_COLOR", "PALETTE", "PATH_COLOR", "SELECTED_COLOR", "class_color",
           "delta_e", "mix_color"]

PATH_COLOR = "#ff9f1c"
COMPARE_COLOR = "#7b2cbf"
SELECTED_COLOR = "#111111"
PALETTE = ("#4c78a8", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6",
           "#9d755d", "#bab0ac", "#dbdb8d", "#8db600", "#6b6ecf", "#882d17", "#a1caf1",
           "#393b79", "#b3446c", "#637939", "#2b3d26", "#636363", "#e377c2")
_WHITE = np.array([247, 247, 247])


def class_color(k: int, n_classes: int) -> str:
    """Solid colour of class ``k`` of ``n_classes``."""
    if n_classes == 2:
        return _scale.class_color(k, 2)
    return PALETTE[k % len(PALETTE)]


def mix_color(prediction: Sequence[float]) -> str:
    """Colour of a prediction: the diverging scale for two classes, else the argmax
    class's colour blended toward white as confidence falls to chance."""
    p = np.asarray(prediction, dtype=float)
    if len(p) == 2:
        return _scale.mix_color(p)
    k, n = int(p.argmax()), len(p)
    base = np.array([int(PALETTE[k % len(PALETTE)][i:i + 2], 16) for i in (1, 3, 5)])
    t = min(1.0, max(0.0, (float(p.max()) - 1 / n) * n / max(n - 1, 1)))
    rgb = _WHITE + (base - _WHITE) * (0.25 + 0.75 * t)  # never quite white: the class shows
    return "#" + "".join(f"{round(float(c)):02x}" for c in rgb)


def _lab(hex_color: str) -> np.ndarray:
    rgb = np.array([int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ lin / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str) -> float:
    """CIE76 colour difference of two ``#rrggbb`` colours (≈ 2.3: just noticeable).

    >>> round(delta_e("#ffffff", "#000000"))
    100
    """
    return float(np.linalg.norm(_lab(a) - _lab(b)))
