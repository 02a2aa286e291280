"""stateseer's abstraction engine: abstract states, FSMs, patterns, metrics, DFAs, exports.

numpy, scikit-learn and networkx only — this package never imports torch or dash.
"""

from __future__ import annotations

# isort: off
# The built-in abstractors register in this order, the order --method lists them.
from .kmeans import KMeansAbstractor
from .gmm import GMMAbstractor
from .grid import GridAbstractor

# isort: on
from .abstractor import (
    ABSTRACTORS,
    BaseAbstractor,
    abstractor_names,
    make_abstractor,
    register_abstractor,
)
from .dfa import ExtractedDFA, extract_dfa
from .errors import AbstractionError
from .fsm import FSM

__all__ = [
    "ABSTRACTORS",
    "FSM",
    "AbstractionError",
    "BaseAbstractor",
    "ExtractedDFA",
    "GMMAbstractor",
    "GridAbstractor",
    "KMeansAbstractor",
    "abstractor_names",
    "extract_dfa",
    "make_abstractor",
    "register_abstractor",
]
