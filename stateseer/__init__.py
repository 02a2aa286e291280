"""stateseer: explain recurrent text classifiers by state abstraction.

One import name; the three layers install under it:

=============================  =============================================================
``stateseer.rnn_models``       torch: tokenisers, data sets, models, training, recording
``stateseer.abstraction``      numpy/scikit-learn: abstractors, FSM, patterns, DFAs, exports
``stateseer.app``              Dash explorer, study mode, workflows and the command line
=============================  =============================================================

The names users write in their own code are here, loaded on first use (``import stateseer``
imports neither torch nor Dash):

>>> import stateseer
>>> stateseer.load_dataset("tomita3").classes
['reject', 'accept']

A run end to end (train, record, abstract, export, explore)::

    cfg = stateseer.TrainConfig(dataset="tomita3", arch="lstm")
    run = stateseer.train_run(cfg, "runs/t3")
    stateseer.record_run(run)
    stateseer.abstract_run(run, n_states=8)
    stateseer.export_run(run, "dot", "t3.dot")
    app = stateseer.create_app(run)
"""

from __future__ import annotations

import importlib
from typing import Any

from stateseer.core.version import __version__

#: public name → the module (under ``stateseer.``) that defines it
_API: dict[str, str] = {
    # errors (one line, naming the fix)
    "StateseerError": "core.errors", "DataError": "core.errors",
    "CheckpointError": "core.errors", "TraceError": "core.errors",
    "AbstractionError": "abstraction.errors",
    # data
    "load_dataset": "rnn_models.datasets", "TextDataset": "rnn_models.datasets",
    "DATASETS": "rnn_models.datasets", "GRAMMARS": "rnn_models.formal",
    "Vocab": "rnn_models.tokenizers",
    # models: built in, or your own through the adapter
    "ARCHITECTURES": "rnn_models.archs", "build_model": "rnn_models.archs",
    "RNNClassifier": "rnn_models.models", "RecurrentAdapter": "rnn_models.models",
    "TraceAdapter": "rnn_models.protocol", "Traceable": "rnn_models.protocol",
    "ClassifierAdapter": "rnn_models.classifier",
    # runs: open, train, create, import, record
    "RunDir": "core.rundir", "ModelRun": "rnn_models.run",
    "load_model": "rnn_models.loading", "TrainConfig": "rnn_models.train",
    "train_run": "rnn_models.train", "create_run": "rnn_models.run",
    "create_model_run": "rnn_models.run", "import_traces": "core.imported",
    "record_run": "rnn_models.engine", "record_texts": "rnn_models.record",
    "Traces": "core.traces",
    # abstraction
    "abstract_run": "abstraction.pipeline", "Abstraction": "abstraction.pipeline",
    "KMeansAbstractor": "abstraction.abstractors.kmeans",
    "GMMAbstractor": "abstraction.abstractors.gmm",
    "GridAbstractor": "abstraction.abstractors.grid",
    "ABSTRACTORS": "abstraction.abstractors.base",
    "make_abstractor": "abstraction.abstractors.base", "FSM": "abstraction.automata.fsm",
    "extract_dfa": "abstraction.automata.dfa.extract",
    "ExtractedDFA": "abstraction.automata.dfa.extracted",
    # run-level work
    "sweep_run": "app.workflows.sweep", "extract_run_dfa": "app.workflows.dfa",
    "measure_forcing": "app.workflows.forcing", "export_run": "app.workflows.exports",
    "prepare_run": "app.workflows.prepare", "diagnose_run": "app.workflows.diagnose",
    "repair_run": "app.workflows.repair",
    # the explorer, and a run as it reads it (one input's trace: RunView(path).trace_instance)
    "create_app": "app.main", "serve": "app.main", "show": "app.notebook",
    "RunView": "app.workflows.runview",
}

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(f"{__name__}.{_API[name]}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'stateseer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})

