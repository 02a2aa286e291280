"""stateseer's model side: tokenisers, data sets, RNN classifiers, training and traces.

Importing the package is cheap and does not import torch; the torch-based names
(``RNNClassifier``, ``train_run``, ``record_run``, ``load_model`` ...) are loaded on first
use. The file formats that ``abstraction`` reads (errors, the run directory, traces,
automata, the atomic writer, DOT) live in the torch-free :mod:`rnn_models.formats`
layer, which imports nothing else of this package; model loading is
:func:`rnn_models.loading.load_model`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "StateseerError": "formats.errors", "DataError": "formats.errors",
    "CheckpointError": "formats.errors", "TraceError": "formats.errors",
    "Vocab": "tokenizers", "tokenize": "tokenizers",
    "TextDataset": "datasets", "load_dataset": "datasets",
    "GRAMMARS": "formal", "DFA": "formal",
    "RunDir": "formats.rundir", "Run": "run", "create_run": "run",
    "Traces": "formats.traces", "SplitTraces": "formats.traces",
    "load_model": "loading",
    "RNNClassifier": "models", "Traceable": "models", "TraceAdapter": "models",
    "RecurrentAdapter": "models",
    "ARCHITECTURES": "archs", "build_model": "archs", "ModelProtocolError": "protocol",
    "MinRNNClassifier": "minrnn", "MambaClassifier": "mamba",
    "create_model_run": "factory", "import_traces": "formats.imported",
    "TrainConfig": "train", "train_run": "train",
    "record_run": "record", "record_texts": "record", "record_traces": "record",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'rnn_models' has no attribute {name!r}")
