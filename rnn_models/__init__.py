"""stateseer's model side: tokenisers, data sets, RNN classifiers, training and traces.

Importing the package is cheap and does not import torch; the torch-based names
(``RNNClassifier``, ``train_run``, ``record_run`` ...) are loaded on first use. The
numpy-only modules (``errors``, ``tokenizers``, ``datasets``, ``formal``, ``traces``,
``run``) can be used without torch, which is how ``abstraction`` reads traces.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "StateseerError": "errors", "DataError": "errors", "CheckpointError": "errors",
    "TraceError": "errors",
    "Vocab": "tokenizers", "tokenize": "tokenizers",
    "TextDataset": "datasets", "load_dataset": "datasets",
    "GRAMMARS": "formal", "DFA": "formal",
    "Run": "run", "create_run": "run",
    "Traces": "traces", "SplitTraces": "traces",
    "RNNClassifier": "models", "Traceable": "models", "TraceAdapter": "models",
    "RecurrentAdapter": "models",
    "TrainConfig": "train", "train_run": "train",
    "record_run": "record", "record_texts": "record", "record_traces": "record",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'rnn_models' has no attribute {name!r}")
