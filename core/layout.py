"""The run directory's layout: every path one model's work lands in, spelled once.

::

    RUN/config.json           data set, tokenizer, architecture, hyper-parameters, seed
    RUN/model.pt              state_dict only
    RUN/vocab.json
    RUN/metrics.json          train/val/test accuracy; "abstraction" figures below
    RUN/traces/               recorded traces: shards + meta.json (the traces format)
    RUN/abstraction/          abstractor.npz, fsm.json, patterns.json, SPLIT.states.npy,
                              meta.json (written last), dfa.json, centroids.npy
    RUN/index/                the nearest-context index (train.contexts.npz/.json)
    RUN/diagnosis/            findings.json
    RUN/sweep/                sweep.json, sweep.png, sweep.html
    NEW/repair.json           a repaired run: the repair's figures, its edits
    NEW/repair_edits.json     (and NEW/control/, the control retraining)

A command writes ``traces/`` and ``abstraction/`` into ``traces.tmp/`` and
``abstraction.tmp/`` first and swaps them into place when whole. Every module reads these
names from here (``tests/test_architecture.py`` refuses a path literal of the layout
anywhere else): :class:`RunLayout` gives the paths of one run, the constants the names
inside a folder (what a writer of ``abstraction.tmp/`` needs).

Examples
--------
>>> lay = RunLayout("runs/rt")
>>> lay.findings.as_posix(), lay.work(lay.traces).as_posix()
('runs/rt/diagnosis/findings.json', 'runs/rt/traces.tmp')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ABSTRACTION", "ABSTRACTOR", "CENTROIDS", "CONFIG", "CONTEXTS_JSON",
           "CONTEXTS_NPZ", "CONTROL", "DFA", "DIAGNOSIS", "FINDINGS", "FSM", "INDEX", "META",
           "METRICS", "MODEL", "PATTERNS", "REPAIR", "REPAIR_EDITS", "SWEEP", "SWEEP_HTML",
           "SWEEP_JSON", "SWEEP_PNG", "TRACES", "VOCAB", "WORK_SUFFIX", "RunLayout"]

# the run's own files
CONFIG = "config.json"
MODEL = "model.pt"
VOCAB = "vocab.json"
METRICS = "metrics.json"
# its folders
TRACES = "traces"
ABSTRACTION = "abstraction"
INDEX = "index"
DIAGNOSIS = "diagnosis"
SWEEP = "sweep"
CONTROL = "control"
#: a folder being written: ``traces.tmp`` beside ``traces``
WORK_SUFFIX = ".tmp"
# inside traces/ and abstraction/
META = "meta.json"
# inside abstraction/
ABSTRACTOR = "abstractor.npz"
FSM = "fsm.json"
PATTERNS = "patterns.json"
DFA = "dfa.json"
CENTROIDS = "centroids.npy"
# inside index/
CONTEXTS_NPZ = "train.contexts.npz"
CONTEXTS_JSON = "train.contexts.json"
# inside diagnosis/
FINDINGS = "findings.json"
# inside sweep/ (or a sweep's --out)
SWEEP_JSON = "sweep.json"
SWEEP_PNG = "sweep.png"
SWEEP_HTML = "sweep.html"
# a repaired run's own files
REPAIR = "repair.json"
REPAIR_EDITS = "repair_edits.json"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run directory (nothing is read or created).

    Parameters
    ----------
    root : str or Path
        The run directory.
    """

    root: Path

    def __init__(self, root: str | Path) -> None:
        object.__setattr__(self, "root", Path(root))

    @staticmethod
    def work(folder: Path) -> Path:
        """Where ``folder`` is written before it is swapped into place."""
        return folder.with_name(folder.name + WORK_SUFFIX)

    config = property(lambda self: self.root / CONFIG)
    model = property(lambda self: self.root / MODEL)
    vocab = property(lambda self: self.root / VOCAB)
    metrics = property(lambda self: self.root / METRICS)
    traces = property(lambda self: self.root / TRACES)
    traces_meta = property(lambda self: self.root / TRACES / META)
    abstraction = property(lambda self: self.root / ABSTRACTION)
    abstraction_meta = property(lambda self: self.root / ABSTRACTION / META)
    fsm = property(lambda self: self.root / ABSTRACTION / FSM)
    dfa = property(lambda self: self.root / ABSTRACTION / DFA)
    centroids = property(lambda self: self.root / ABSTRACTION / CENTROIDS)
    index = property(lambda self: self.root / INDEX)
    contexts = property(lambda self: (self.root / INDEX / CONTEXTS_NPZ,
                                      self.root / INDEX / CONTEXTS_JSON))
    diagnosis = property(lambda self: self.root / DIAGNOSIS)
    findings = property(lambda self: self.root / DIAGNOSIS / FINDINGS)
    sweep = property(lambda self: self.root / SWEEP)
    sweep_json = property(lambda self: self.root / SWEEP / SWEEP_JSON)
    repair = property(lambda self: self.root / REPAIR)
    repair_edits = property(lambda self: self.root / REPAIR_EDITS)
    control = property(lambda self: self.root / CONTROL)
