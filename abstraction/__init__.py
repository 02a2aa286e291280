"""stateseer's abstraction engine: abstract states, FSMs, patterns, metrics, DFAs, exports.

numpy, scikit-learn and networkx only — this package never imports torch or dash.
"""

from __future__ import annotations

# isort: off
# The built-in abstractors register in this order, the order --method lists them.
from stateseer.abstraction.abstractors.kmeans import KMeansAbstractor
from stateseer.abstraction.abstractors.gmm import GMMAbstractor
from stateseer.abstraction.abstractors.grid import GridAbstractor

# isort: on
from stateseer.abstraction.abstractors.base import (
    ABSTRACTORS,
    BaseAbstractor,
    abstractor_names,
    make_abstractor,
    register_abstractor,
)
from stateseer.abstraction.automata.dfa.extract import extract_dfa
from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA
from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.errors import AbstractionError

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
