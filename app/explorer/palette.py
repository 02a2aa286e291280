"""Colours of the explorer: the class colours of :mod:`stateseer.abstraction.colors` (one scale for
the browser and the exports: the diverging red–white–blue scale for two classes, a
20-colour qualitative palette for more), the path, compare and selection colours kept
apart from every class colour, and the CIELAB ΔE that checks it.

Examples
--------
>>> class_color(0, 4), class_color(1, 4), mix_color([0.0, 0.0, 1.0, 0.0])
('#4c78a8', '#54a24b', '#e45756')
"""

from __future__ import annotations

import numpy as np

from stateseer.abstraction.colors import CATEGORICAL, class_color, mix_color

__all__ = ["COMPARE_COLOR", "PALETTE", "PATH_COLOR", "SELECTED_COLOR", "class_color",
           "delta_e", "mix_color"]

PATH_COLOR = "#ff9f1c"
COMPARE_COLOR = "#7b2cbf"
SELECTED_COLOR = "#111111"
PALETTE = CATEGORICAL


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
