"""stateseer's abstraction engine: abstract states, FSMs, patterns, metrics, DFAs, exports.

numpy, scikit-learn and networkx only — this package never imports torch or dash.

======================  =========================================================
``abstractors/``        the estimators: base and registry, k-means, GMM, grid, features
``automata/``           the machines: FSM, exact DFAs (``dfa/``), WFA, layout, exports
``analysis/``           what is read off them: metrics, patterns, diagnosis, neighbours
``pipeline``            a run's whole abstraction (:func:`abstract_run`)
``sharded``             the same as maps over trace shards (in-process or on Dask)
======================  =========================================================

The names below load on first use, so importing one module (an FSM export, say) does not
import scikit-learn's clustering with it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: name → the module (under ``stateseer.abstraction.``) that defines it
_API: dict[str, str] = {
    "ABSTRACTORS": "abstractors.base", "BaseAbstractor": "abstractors.base",
    "abstractor_names": "abstractors.base", "make_abstractor": "abstractors.base",
    "register_abstractor": "abstractors.base",
    "KMeansAbstractor": "abstractors.kmeans", "GMMAbstractor": "abstractors.gmm",
    "GridAbstractor": "abstractors.grid",
    "ExtractedDFA": "automata.dfa.extracted", "extract_dfa": "automata.dfa.extract",
    "FSM": "automata.fsm", "AbstractionError": "errors",
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    if name in _API:
        if _API[name].startswith("abstractors."):  # the registry whole, in --method order
            from stateseer.abstraction.abstractors.base import load_builtins

            load_builtins()
        value = getattr(importlib.import_module(f"{__name__}.{_API[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
