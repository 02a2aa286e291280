"""stateseer's abstraction engine: abstract states, FSMs, patterns, metrics, DFAs, exports.

numpy, scikit-learn and networkx only — this package never imports torch or dash.
"""

from __future__ import annotations

from .cluster import ABSTRACTORS, GMMAbstractor, GridAbstractor, KMeansAbstractor, make_abstractor
from .dfa import ExtractedDFA, extract_dfa
from .errors import AbstractionError
from .fsm import FSM

__all__ = [
    "ABSTRACTORS",
    "FSM",
    "AbstractionError",
    "ExtractedDFA",
    "GMMAbstractor",
    "GridAbstractor",
    "KMeansAbstractor",
    "extract_dfa",
    "make_abstractor",
]
