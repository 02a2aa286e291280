"""stateseer's abstraction engine: abstract states, FSMs, patterns, metrics, DFAs, exports.

numpy, scikit-learn and networkx only — this package never imports torch or dash.
"""

from __future__ import annotations

from .cluster import ABSTRACTORS, GMMAbstractor, GridAbstractor, KMeansAbstractor, make_abstractor
from .errors import AbstractionError

__all__ = [
    "ABSTRACTORS",
    "AbstractionError",
    "GMMAbstractor",
    "GridAbstractor",
    "KMeansAbstractor",
    "make_abstractor",
]
