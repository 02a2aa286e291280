"""The torch-free formats layer: what ``rnn_models`` writes and ``abstraction`` reads.

=====================  ===========================================================
``errors``             user-facing error types (one line, naming the fix)
``atomic``             the one crash-safe writer (tmp file, fsync, ``os.replace``)
``rundir``             :class:`RunDir`: config, metrics, vocabulary of a run directory
``traces``             :class:`Traces`: recorded hidden states, memory-mapped
``automaton``          :class:`Automaton` base, table :class:`DFA`, :func:`minimize`
``dot``                the one DOT writer (AALpy's ``__start0`` convention)
=====================  ===========================================================

Nothing here imports torch, and nothing here imports ``rnn_models`` outside this package
(``tests/test_architecture.py`` checks both statically). Model loading is
:func:`stateseer.rnn_models.loading.load_model`.
"""

from __future__ import annotations

from .atomic import atomic_save_npy, atomic_save_npz, atomic_write_bytes, atomic_write_text
from .automaton import DFA, Automaton, TableAutomaton, all_strings, minimal_size, minimize
from .errors import CheckpointError, DataError, StateseerError, TraceError
from .rundir import RunDir, data_section, sha256_file
from .traces import SplitTraces, Traces

__all__ = [
    "DFA",
    "Automaton",
    "CheckpointError",
    "DataError",
    "RunDir",
    "SplitTraces",
    "StateseerError",
    "TableAutomaton",
    "TraceError",
    "Traces",
    "all_strings",
    "atomic_save_npy",
    "atomic_save_npz",
    "atomic_write_bytes",
    "atomic_write_text",
    "data_section",
    "minimal_size",
    "minimize",
    "sha256_file",
]
