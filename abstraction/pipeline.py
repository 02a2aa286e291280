"""The whole abstraction of a run: fit, assign, build the FSM, mine patterns, measure.

``abstract_run(RUN)`` reads ``RUN/traces``, fits the abstractor on the training split,
assigns every split's steps to states, builds the FSM from the training paths, mines
patterns, measures fidelity on the test split, and writes::

    RUN/abstraction/meta.json          parameters and provenance (written last)
    RUN/abstraction/abstractor.npz     fitted PCA + clustering (plain arrays, no pickle)
    RUN/abstraction/fsm.json           the FSM (stateseer.fsm v1)
    RUN/abstraction/fsm.arrays.npz     the same FSM as arrays (the server's fast read;
                                       ignored unless it mirrors fsm.json as it is now)
    RUN/abstraction/SPLIT.states.npy   FSM state after every step (int32)
    RUN/abstraction/SPLIT.simulated.npy  state of the FSM run on the tokens alone (int32)
    RUN/abstraction/SPLIT.simulated_prediction.npy  class the FSM alone predicts per input
    RUN/abstraction/patterns.json      n-grams and contexts per state, influential and
                                       buggy patterns

and the figures into ``metrics.json["abstraction"]``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import clone
from threadpoolctl import threadpool_limits

from stateseer.abstraction import sharded
from stateseer.abstraction.abstractors.base import BaseAbstractor, make_abstractor
from stateseer.abstraction.abstractors.features import shared_projections
from stateseer.abstraction.analysis.metrics import (
    agreement_baseline,
    auto_candidates,
    bootstrap_ci,
    choose_knee,
    fidelity,
    quality,
)
from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.errors import AbstractionError
from stateseer.abstraction.kernels import warm_up
from stateseer.core import layout
from stateseer.core.atomic import atomic_write_text, swap_dir
from stateseer.core.defaults import AUTO_CAP, N_STATES
from stateseer.core.engine import Engine, SerialEngine, engine_scope
from stateseer.core.errors import DAMAGED_NPY, StateseerError
from stateseer.core.reading import load_json
from stateseer.core.rundir import RunDir, claim, release
from stateseer.core.traces import SplitTraces, Traces

__all__ = ["Abstraction", "abstract_run", "fit_abstraction", "fresh_traces", "min_states"]
FORMAT = "stateseer.abstraction"
VERSION = 1


@dataclass
class Abstraction:
    """A fitted abstraction of one run: abstractor, FSM, per-split paths and figures.

    Attributes
    ----------
    abstractor : estimator
        Fitted :class:`~stateseer.abstraction.abstractors.base.BaseAbstractor`.
    fsm : FSM
    states, simulated : dict of str to ndarray of shape (n_steps,)
        FSM state after every step from the RNN's hidden states, and from running the
        FSM on the tokens alone.
    sim_predictions : dict of str to ndarray of shape (n_inputs,)
        Class index the FSM alone predicts for every input (``fsm.simulation`` decides
        how); empty for an abstraction saved before it was recorded.
    metrics : dict
    patterns : dict
    info : dict
        Parameters and provenance.
    """

    abstractor: Any
    fsm: FSM
    states: dict[str, np.ndarray]
    simulated: dict[str, np.ndarray]
    metrics: dict[str, Any] = field(default_factory=dict)
    patterns: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    sim_predictions: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_states(self) -> int:
        """Abstract states (the FSM has one more: the initial state)."""
        return self.fsm.n_states - 1

    def assign(self, hidden: np.ndarray, proba: np.ndarray) -> np.ndarray:
        """FSM state (≥ 1) of new hidden states, shape (n_steps,)."""
        if len(hidden) == 0:
            return np.zeros(0, np.int64)
        return self.abstractor.predict(hidden, proba) + 1

    def paths(self, split: str, i: int, traces: Traces) -> tuple[list[int], list[int]]:
        """Real and simulated state paths of input ``i`` (initial state first)."""
        sl = traces[split].steps(i)
        init = [self.fsm.initial]
        return (init + self.states[split][sl].tolist(),
                init + self.simulated[split][sl].tolist())

    def simulated_prediction(self, split: str, traces: Traces) -> np.ndarray:
        """Class index the FSM alone predicts for each input of ``split``, (n_inputs,)."""
        if split in self.sim_predictions:
            return self.sim_predictions[split]
        tr = traces[split]
        return self.fsm.labels[self.fsm.final_states(self.simulated[split], tr.offsets)]

    def trace_rows(self, traces: Traces, split: str) -> list[dict[str, Any]]:
        """Rows of the traces CSV (DESIGN.md) for one split; with a probabilistic FSM they
        carry ``simulated_prediction`` (the class of the tracked state distribution)."""
        tr = traces[split]
        classes = traces.classes
        sim_pred = (self.simulated_prediction(split, traces)
                    if self.fsm.simulation != "argmax" else None)
        rows = []
        for i in range(tr.n_inputs):
            real, sim = self.paths(split, i, traces)
            row = {"id": int(tr.rows[i]), "split": split,
                   "label": classes[int(tr.labels[i])] if tr.labels[i] >= 0 else "",
                   "prediction": classes[int(tr.predictions[i])],
                   "tokens": tr.tokens(i), "states": real, "simulated_states": sim}
            if sim_pred is not None:
                row["simulated_prediction"] = classes[int(sim_pred[i])]
            rows.append(row)
        return rows

    def _repr_html_(self) -> str:
        """In a notebook: the FSM drawn small (the 2 heaviest edges per state) and the
        headline figures."""
        from stateseer.core.reprs import figures_html

        m = self.metrics
        rows = [("states", m.get("n_states", self.fsm.n_states - 1)),
                ("simulation fidelity", m.get("simulation_fidelity")),
                ("chance agreement", m.get("simulation_chance")),
                ("Cohen's κ", m.get("simulation_kappa")),
                ("forcing agreement", m.get("forcing_agreement")),
                ("determinism", m.get("determinism"))]
        try:
            from stateseer.abstraction.automata.export import export_data

            svg = export_data(self.fsm, "svg", top_k=2)
            svg = svg.decode() if isinstance(svg, bytes) else svg
            drawn = (f"<div style='max-width:560px;overflow:auto'>"
                     f"{svg[svg.index('<svg'):]}</div>")
        except (StateseerError, OSError, ValueError) as exc:  # no Graphviz: the figures
            drawn = f"<p style='font:12px sans-serif'>(not drawn: {exc})</p>"
        return figures_html("abstraction", rows, drawn)

    # persistence ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write into ``path`` via a temporary directory swapped in whole (never half-written)."""
        path = Path(path)
        tmp = claim(path.with_name(path.name + ".tmp"))
        self.abstractor.save(tmp / layout.ABSTRACTOR)
        self.fsm.save(tmp / layout.FSM)
        # the FSM as the JSON reads back (its transition order, its rounded figures)
        save_fsm_arrays(self.fsm.exchanged(), tmp / FSM_ARRAYS,
                        tmp / layout.FSM)
        for split, arr in self.states.items():
            np.save(tmp / f"{split}.states.npy", np.asarray(arr).astype(np.int32, copy=False))
            np.save(tmp / f"{split}.simulated.npy",
                    np.asarray(self.simulated[split]).astype(np.int32, copy=False))
            if split in self.sim_predictions:
                np.save(tmp / f"{split}.simulated_prediction.npy",
                        self.sim_predictions[split].astype(np.int32))
        (tmp / layout.PATTERNS).write_text(json.dumps(self.patterns, ensure_ascii=False),
                                           encoding="utf-8")
        meta = {"format": FORMAT, "version": VERSION, "info": self.info,
                "metrics": self.metrics, "splits": sorted(self.states)}
        dfa = path / layout.DFA  # an extracted DFA depends on the traces, not on this
        if dfa.exists():
            shutil.copy2(dfa, tmp / layout.DFA)
        atomic_write_text(tmp / layout.META, json.dumps(meta, indent=2))
        release(tmp)
        swap_dir(tmp, path)  # one atomic exchange: a crash leaves the old or the new whole

    @classmethod
    def load(cls, path: str | Path) -> Abstraction:
        """Read an abstraction written by :meth:`save`.

        Raises
        ------
        AbstractionError
            Missing, damaged or inconsistent files (one line naming the file and the fix).
        """
        path = Path(path)
        fix = f"rerun `stateseer abstract {path.parent}`"
        if not (path / layout.META).exists():
            raise AbstractionError(
                f"no abstraction in {path}; run `stateseer abstract {path.parent}`"
            )
        meta = _read_json(path / layout.META, fix)
        if meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise AbstractionError(f"{path} holds an abstraction of another format; {fix}")
        splits, metrics, info = meta.get("splits"), meta.get("metrics"), meta.get("info")
        if not (isinstance(splits, list) and all(isinstance(x, str) for x in splits)
                and isinstance(metrics, dict) and isinstance(info, dict)):
            raise AbstractionError(f"{path / layout.META} is corrupt (no split list, metrics "
                                   f"or info); {fix}")
        abstractor = BaseAbstractor.load(path / layout.ABSTRACTOR)
        fsm = load_fsm_fast(path / FSM_ARRAYS, path / layout.FSM)
        states = {s: _read_states(path / f"{s}.states.npy", fsm.n_states, fix) for s in splits}
        simulated = {s: _read_states(path / f"{s}.simulated.npy", fsm.n_states, fix)
                     for s in splits}
        for s in splits:
            if len(states[s]) != len(simulated[s]):
                raise AbstractionError(f"{path / (s + '.simulated.npy')} does not match "
                                       f"{s}.states.npy in length; {fix}")
        patterns = _read_json(path / layout.PATTERNS, fix)
        sim_pred = {}
        for s in splits:
            f = path / f"{s}.simulated_prediction.npy"
            if f.exists():  # absent in abstractions written before it was recorded
                sim_pred[s] = _read_states(f, len(fsm.classes), fix)
        return cls(abstractor=abstractor, fsm=fsm, states=states, simulated=simulated,
                   metrics=metrics, patterns=patterns, info=info, sim_predictions=sim_pred)


#: the FSM's arrays beside its JSON, for a server that must start fast: a binary form that
#: loads in milliseconds where the exchange format takes seconds to parse on big runs
FSM_ARRAYS = "fsm.arrays.npz"
#: where a big run's abstraction keeps its states while it runs (RUN/SCRATCH)
SCRATCH = "abstraction.scratch"


def save_fsm_arrays(fsm: FSM, path: Path, json_path: Path) -> None:
    """Write the FSM's arrays (and, as JSON, the rest) to ``path``, stamped with the size
    and modification time of ``json_path``, the exchange format it mirrors (``fsm`` as
    read from that JSON, so that both load alike)."""
    st = json_path.stat()
    head = {"classes": fsm.classes, "alphabet": fsm.alphabet, "initial": fsm.initial,
            "fallback": fsm.fallback, "simulation": fsm.simulation,
            "smoothing": fsm.smoothing, "bandwidth": fsm.bandwidth, "provenance": fsm.info}
    arrays = {"source": fsm.source, "token": fsm.token, "target": fsm.target,
              "count": fsm.count, "visits": fsm.visits, "prediction": fsm.prediction,
              "stamp": np.array([st.st_size, st.st_mtime_ns], np.int64),
              "head": np.array(json.dumps(head, ensure_ascii=False))}
    if fsm.coords is not None:
        arrays["coords"] = fsm.coords
    np.savez(path, **arrays)


def load_fsm_fast(path: Path, json_path: Path) -> FSM:
    """The FSM from its arrays when they mirror ``json_path`` as it is now (same size and
    modification time), else from the JSON (a missing, damaged or stale array file is
    never trusted)."""
    try:
        st = json_path.stat()
        with np.load(path, allow_pickle=False) as z:
            if z["stamp"].tolist() != [st.st_size, st.st_mtime_ns]:
                raise ValueError("stale")
            head = json.loads(str(z["head"]))
            fsm = FSM(classes=list(head["classes"]), alphabet=list(head["alphabet"]),
                      visits=z["visits"], prediction=z["prediction"], source=z["source"],
                      token=z["token"], target=z["target"], count=z["count"],
                      coords=z["coords"] if "coords" in z.files else None,
                      fallback=head["fallback"], initial=int(head["initial"]),
                      info=dict(head["provenance"]), bandwidth=float(head["bandwidth"]),
                      simulation=str(head["simulation"]),
                      smoothing=float(head["smoothing"]))
    except (*DAMAGED_NPY, KeyError, TypeError, StateseerError):
        return FSM.load(json_path)
    return fsm


def _read_json(path: Path, fix: str) -> dict[str, Any]:
    """A JSON object from ``path``, or a one-line :class:`AbstractionError`."""
    try:
        data = load_json(path)
    except FileNotFoundError:
        raise AbstractionError(f"{path} is missing; {fix}") from None
    except (OSError, StateseerError):  # not JSON, not a file, too large or too deep
        raise AbstractionError(f"{path} is corrupt (not JSON); {fix}") from None
    if not isinstance(data, dict):
        raise AbstractionError(f"{path} is corrupt (not a JSON object); {fix}")
    return data


def _read_states(path: Path, n_fsm_states: int, fix: str) -> np.ndarray:
    """FSM state ids of shape (n_steps,) from ``path``, checked against the FSM's size:
    memory-mapped, read-only (at 1M inputs reading the states and simulated paths of a
    run into int64 arrays took 0.3 GB of the server's memory)."""
    try:
        a = np.load(path, allow_pickle=False, mmap_mode="r")
    except FileNotFoundError:
        raise AbstractionError(f"{path} is missing; {fix}") from None
    except DAMAGED_NPY:
        raise AbstractionError(f"{path} is corrupt (not a .npy array); {fix}") from None
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise AbstractionError(f"{path} is corrupt (not a 1-d integer array); {fix}")
    if len(a) and (int(a.min()) < 0 or int(a.max()) >= n_fsm_states):
        raise AbstractionError(f"{path} refers to states outside 0..{n_fsm_states - 1}; {fix}")
    return a


def fresh_traces(run: RunDir) -> Traces:
    """The run's traces, refused if they were recorded from another ``model.pt``."""
    traces = Traces(run.traces_dir)
    if run.model_path.exists() and traces.meta.get("model_sha256") not in (
            None, run.model_sha256()):
        raise AbstractionError(
            f"the traces in {run.traces_dir} were recorded from another model.pt; re-record "
            f"them with `stateseer record {run.path}`"
        )
    return traces


def _read_alphabet(run: RunDir) -> list[str]:
    try:
        return run.vocab_tokens()
    except StateseerError as exc:
        raise AbstractionError(str(exc)) from None


def _split_figures(fsm: FSM, tr: SplitTraces, states: np.ndarray, sim_pred: np.ndarray):
    """Label fidelity (real final states) and simulation fidelity (the FSM's own
    predictions ``sim_pred``, shape (n_inputs,)) against the RNN's predictions."""
    sf = float((sim_pred == tr.predictions).mean()) if tr.n_inputs else float("nan")
    return fidelity(fsm, fsm.final_states(states, tr.offsets), tr.predictions), sf


def fit_abstraction(
    traces: Traces,
    alphabet: list[str],
    *,
    n_states: int = N_STATES,
    method: str | BaseAbstractor = "kmeans",
    pca: int = 20,
    features: str = "margin",
    fallback: str = "displacement",
    simulation: str = "probabilistic",
    split_by_prediction: bool = True,
    splits: tuple[str, ...] | None = None,
    random_state: int = 0,
    max_fit_samples: int = 30_000,
    pool: ThreadPoolExecutor | None = None,
    cluster: str | Engine | None = None,
    out_dir: str | Path | None = None,
) -> Abstraction:
    """Fit an abstraction on the training split of ``traces`` and apply it to every split.

    Every heavy step maps over the splits' shards (:mod:`stateseer.abstraction.sharded`): the fit
    sample is drawn per shard and the fit runs here; assignment, the FSM's counts and the
    simulation run per shard, in this process or on a Dask cluster, with the same result.

    Parameters
    ----------
    traces : Traces
    alphabet : list of str
        The vocabulary's tokens (FSM transitions refer to them).
    n_states, pca, features, split_by_prediction, random_state, max_fit_samples
        Parameters of the abstractor built from ``method``.
    method : str or BaseAbstractor
        A registered kind (:data:`stateseer.abstraction.abstractors.base.ABSTRACTORS`), or an
        abstractor
        instance: an unfitted copy of it is fitted with its own parameters (the ones
        above are then not used).
    fallback : str
        FSM simulation rule for unseen (state, token) pairs.
    simulation : {'probabilistic', 'argmax'}
        How the FSM alone predicts (see :mod:`stateseer.abstraction.automata.fsm`).
    splits : tuple of str, optional
        Splits to assign (default: all recorded).
    pool : ThreadPoolExecutor, optional
        Pattern mining starts as soon as each split's states are known and runs beside the
        rest; the patterns are then futures until :func:`_patterns`.
    cluster : str or Engine, optional
        Where the per-shard steps run: ``local``, ``local:N``, ``tcp://HOST:PORT`` or an
        open :class:`~stateseer.core.engine.Engine` (default: ``$STATESEER_CLUSTER``,
        else this process; see :mod:`stateseer.core.engine`).
    out_dir : str or Path, optional
        Write the states and simulated paths into ``out_dir/SPLIT.states.npy`` /
        ``SPLIT.simulated.npy`` (int32, filled shard by shard) and hold them memory-mapped,
        instead of in memory.

    Returns
    -------
    Abstraction
    """
    splitting = split_by_prediction and getattr(method, "split_by_prediction", True)
    n_states_ = getattr(method, "n_states", n_states)
    m = min_states(traces) if splitting and isinstance(n_states_, int) else 1
    if isinstance(n_states_, int) and n_states_ < m:  # refused before any work
        raise AbstractionError(f"{n_states_} states cannot separate the {m} classes the "
                               f"model predicts; ask for at least {m} states")
    with engine_scope(cluster) as engine:
        return _fit_abstraction(traces, alphabet, engine, n_states=n_states, method=method,
                                pca=pca, features=features, fallback=fallback,
                                simulation=simulation,
                                split_by_prediction=split_by_prediction, splits=splits,
                                random_state=random_state, max_fit_samples=max_fit_samples,
                                pool=pool, out_dir=out_dir)


def min_states(traces: Traces) -> int:
    """The fewest states an abstraction that keeps each state to one predicted class can
    have: the classes the model predicts for the training inputs (their final steps; the
    steps before may add more, which the fit then refuses)."""
    if "train" not in traces or not traces["train"].n_inputs:
        return 1
    final = np.asarray(traces["train"].final_proba)
    return max(1, len(np.unique(final.argmax(1))))


def _fit_abstraction(traces: Traces, alphabet: list[str], engine: Engine, *, n_states: int,
                     method: str | BaseAbstractor, pca: int, features: str, fallback: str,
                     simulation: str, split_by_prediction: bool,
                     splits: tuple[str, ...] | None, random_state: int,
                     max_fit_samples: int, pool: ThreadPoolExecutor | None,
                     out_dir: str | Path | None) -> Abstraction:
    """:func:`fit_abstraction` on an open engine."""
    if "train" not in traces:
        raise AbstractionError("the traces have no training split; record it with "
                               "`stateseer record RUN --splits train val test`")
    names = ["train", *[s for s in (splits or tuple(traces.split_names)) if s != "train"]]
    refs = {split: sharded.shard_refs(traces, split) for split in names}
    if sum(r.n_steps for r in refs["train"]) == 0:
        raise AbstractionError("the training split has no steps (every input is empty); "
                               "an abstraction needs recorded hidden states")
    every = [r for name in names for r in refs[name]]
    for ref, top in zip(every, engine.map(sharded.max_token, every), strict=True):
        if top >= len(alphabet):
            raise AbstractionError(
                f"token ids in {traces.path / ref.split / 'token_ids.npy'} exceed the "
                f"vocabulary ({len(alphabet)} tokens); re-record with `stateseer record "
                f"{traces.path.parent}`")
    if isinstance(method, BaseAbstractor):
        ab = clone(method)
    else:
        ab = make_abstractor(method, n_states=n_states, pca_components=pca, features=features,
                             split_by_prediction=split_by_prediction,
                             random_state=random_state, max_fit_samples=max_fit_samples)
    sharded.fit_sharded(ab, refs["train"], engine)  # sample per shard, fit here
    h0 = np.asarray(traces.initial_hidden, np.float32)[None]
    p0 = np.asarray(traces.initial_proba, np.float64)[None]
    coords = np.vstack([ab.transform(h0, p0), ab.cluster_centers_]).astype(np.float64)
    states: dict[str, np.ndarray] = {}
    patterns: dict[str, Any] = {}  # split -> its mined lists (futures)
    S = ab.n_states_ + 1
    for split in names:
        states[split], stats = sharded.assign_split(
            engine, ab, refs[split], out_dir=out_dir,
            stats=(S, len(alphabet)) if split == "train" else None)
        if split == "train":
            fsm = sharded.fsm_from_stats(stats, traces.initial_proba, n_states=ab.n_states_,
                                         classes=traces.classes, alphabet=alphabet,
                                         coords=coords, fallback=fallback,
                                         simulation=simulation)
    simulated, sim_pred = {}, {}
    side = {}  # the small splits' simulations run beside the training split's
    if pool is not None:
        # the simulation tables on one pool thread and the first pattern task on the
        # other, this thread waiting: two threads on two cores (beside both pattern
        # threads the tables took 0.4-0.75 s instead of 0.2 on 1M steps)
        tables = pool.submit(sharded.simulation_tables, fsm)
        for split in names:
            _submit_patterns(engine, traces, split, refs[split], states[split], S, pool,
                             patterns)
        tables.result()
        side = {split: pool.submit(sharded.simulate_split, engine, fsm, refs[split],
                                   out_dir=out_dir) for split in names[1:]}
    for split in names:
        simulated[split], (sim_pred[split],) = (
            side[split].result() if split in side
            else sharded.simulate_split(engine, fsm, refs[split], out_dir=out_dir))
    return Abstraction(abstractor=ab, fsm=fsm, states=states, simulated=simulated,
                       patterns=patterns if pool is not None else {},
                       sim_predictions=sim_pred)


def _submit_patterns(engine: Engine, traces: Traces, split: str,
                     refs: list[sharded.ShardRef], st: np.ndarray, S: int, pool,
                     out: dict[str, Any]) -> None:
    """Start mining the pattern lists that need this split's states, over its shards
    (:func:`stateseer.abstraction.sharded.mine_patterns`), one task per group of
    :data:`stateseer.abstraction.sharded.PATTERN_TASKS`; the futures go to ``out[split]``.

    numpy releases the GIL in its sorts, so the lists are mined side by side and beside
    assignment and simulation.
    """
    tasks = sharded.PATTERN_TASKS if split == "train" else (("buggy",),)
    out[split] = [pool.submit(sharded.mine_patterns, engine, refs, st, traces.surface,
                              traces.initial_proba, S, lists) for lists in tasks]


def _patterns(mined: dict[str, Any]) -> dict[str, Any]:
    """The patterns document (``patterns.json``) from each split's mined lists (one future
    per list): the training split's lists, and the buggy patterns of every split."""
    got = {split: {k: v for f in futures for k, v in f.result().items()}
           for split, futures in mined.items()}
    train = got.get("train", {})
    return {"buggy": {split: lists["buggy"] for split, lists in got.items()},
            **{k: train[k] for k in sharded.PATTERN_LISTS if k != "buggy" and k in train}}


def _mode_predictions(ab: Abstraction, traces: Traces, split: str,
                      engine: Engine | None) -> dict[str, np.ndarray]:
    """What the FSM alone predicts for each input of ``split`` in both simulation modes:
    read off the simulated path (argmax) and the stored predictions of the FSM's own mode
    where the abstraction holds them, simulated per shard (on the engine) otherwise."""
    tr, fsm = traces[split], ab.fsm
    out: dict[str, np.ndarray] = {}
    missing = []
    for mode in ("argmax", "probabilistic"):
        if mode == "argmax" and split in ab.simulated:
            out[mode] = fsm.labels[fsm.final_states(ab.simulated[split], tr.offsets)]
        elif mode == fsm.simulation and split in ab.sim_predictions:
            out[mode] = np.asarray(ab.sim_predictions[split])
        else:
            missing.append(mode)
    if missing:
        _, preds = sharded.simulate_split(engine or SerialEngine(), fsm,
                                          sharded.shard_refs(traces, split), modes=missing)
        out.update(zip(missing, preds, strict=True))
    return {mode: out[mode] for mode in ("argmax", "probabilistic")}


def _figures(ab: Abstraction, traces: Traces, eval_split: str, requested: int,
             split_by_prediction: bool, engine: Engine | None = None) -> dict[str, Any]:
    """Fidelity and quality figures (DESIGN.md) of ``ab``, measured on ``eval_split``.

    ``simulation_fidelity`` (the FSM alone, in its own ``simulation`` mode) leads, with a
    95 % bootstrap interval over the split's inputs, and the figure of both modes;
    ``by_construction`` names the figures that are 1.0 whatever the model under the
    options chosen (with split-by-prediction no state straddles a class).
    """
    ev = traces[eval_split]
    sim_pred = ab.simulated_prediction(eval_split, traces)
    lf, sf = _split_figures(ab.fsm, ev, ab.states[eval_split], sim_pred)
    lo, hi = bootstrap_ci(sim_pred == ev.predictions)
    modes = {}
    for mode, pred in _mode_predictions(ab, traces, eval_split, engine).items():
        modes[f"simulation_fidelity_{mode}"] = float((pred == ev.predictions).mean())
    base = agreement_baseline(sim_pred, ev.predictions, len(traces.classes))
    figures: dict[str, Any] = {
        "headline": ["simulation_fidelity", "forcing_agreement"],
        "simulation_fidelity": sf, "simulation_fidelity_ci": [lo, hi],
        "simulation_chance": base["chance"], "simulation_kappa": base["kappa"],
        "simulation": ab.fsm.simulation, **modes,
        "by_construction": ["label_fidelity", "state_purity"] if split_by_prediction else [],
        "n_states": ab.n_states, "n_states_requested": requested,
        "n_fsm_states": ab.fsm.n_states, "label_fidelity": lf, "evaluated_on": eval_split}
    figures.update(quality(ab.fsm, ab.states[eval_split], ev.offsets, ev.token_ids, ev.proba))
    for split in ab.states:
        if split != eval_split and traces[split].n_inputs:
            a, b = _split_figures(ab.fsm, traces[split], ab.states[split],
                                  ab.simulated_prediction(split, traces))
            figures[f"{split}_label_fidelity"], figures[f"{split}_simulation_fidelity"] = a, b
    return figures if traces.meta.get("proba") is not False else _without_predictions(figures)


#: figures read from the model's predictions: null for traces imported without them
PREDICTION_FIGURES = ("simulation_chance", "simulation_kappa", "state_purity",
                      "mean_prediction_entropy")


def _without_predictions(figures: dict[str, Any]) -> dict[str, Any]:
    """``figures`` of traces imported without probabilities: every figure read from the
    predictions is None (their stand-in uniform probabilities make each 1.0 or constant
    by construction), and ``predictions`` is False for the explorer and reports."""
    out = {k: (None if "fidelity" in k or k in PREDICTION_FIGURES else v)
           for k, v in figures.items()}
    return {**out, "predictions": False, "by_construction": [],
            "headline": ["forcing_agreement"]}


def _with_states(method: str | BaseAbstractor, k: int) -> str | BaseAbstractor:
    """``method`` set to ``k`` states when it is an abstractor instance."""
    return clone(method).set_params(n_states=k) if isinstance(method, BaseAbstractor) \
        else method


def _auto_states(traces: Traces, alphabet: list[str], method: str | BaseAbstractor,
                 cap: int, **params: Any) -> tuple[int, dict[str, Any]]:
    """The state count ``n_states='auto'`` picks and the record of why.

    Candidates are :func:`~stateseer.abstraction.analysis.metrics.auto_candidates` (no fewer than
    the classes when states keep to one class, up to ``cap`` and ``cap`` itself); the pick
    is the knee of validation simulation fidelity against states
    (:func:`~stateseer.abstraction.analysis.metrics.choose_knee`). The record is what goes to
    ``metrics.json`` under ``abstraction.auto``: ``cap``, ``candidates``, ``reason`` and
    ``curve`` (one point per candidate, shaped as ``stateseer sweep`` writes them:
    ``n_states``, ``split``, ``label_fidelity``, ``simulation_fidelity``,
    ``simulation_fidelity_ci``, ``seconds``).
    """
    if "val" not in traces or traces["val"].n_inputs == 0:
        raise AbstractionError("--states auto needs a recorded validation split")
    split_classes = params.get("split_by_prediction", True) and \
        getattr(method, "split_by_prediction", True)
    counts = auto_candidates(cap, min_states=len(traces.classes) if split_classes else 1)
    n_train = traces["train"].n_steps if "train" in traces else 0
    curve = []
    val = traces["val"]
    with shared_projections():  # one feature fit for every candidate (same sample)
        for k in counts:
            if k > max(n_train, 1):
                continue
            t0 = time.perf_counter()
            ab = fit_abstraction(traces, alphabet, n_states=k,
                                 method=_with_states(method, k), splits=("train", "val"),
                                 **params)
            lf, _ = _split_figures(ab.fsm, val, ab.states["val"], ab.sim_predictions["val"])
            agree = np.asarray(ab.sim_predictions["val"]) == np.asarray(val.predictions)
            lo, hi = bootstrap_ci(agree, seed=int(params.get("random_state", 0)))
            base = agreement_baseline(ab.sim_predictions["val"], val.predictions,
                                      len(traces.classes))
            curve.append({"n_states": k, "split": "val", "label_fidelity": round(lf, 4),
                          "simulation_fidelity": round(float(agree.mean()), 4),
                          "simulation_fidelity_ci": [round(lo, 4), round(hi, 4)],
                          "simulation_chance": base["chance"],
                          "simulation_kappa": base["kappa"],
                          "seconds": round(time.perf_counter() - t0, 2)})
    if not curve:
        raise AbstractionError("too few hidden states for any candidate state count")
    k, why = choose_knee(curve, cap=int(cap))
    return k, {"cap": int(cap), "candidates": counts, "reason": f"chose {why}; measured on "
               "the validation split", "curve": curve}


def _eval_split(traces: Traces) -> str:
    """``test`` if it has inputs, else ``val``."""
    eval_split = "test" if "test" in traces and traces["test"].n_inputs else "val"
    if eval_split not in traces or traces[eval_split].n_inputs == 0:
        raise AbstractionError("no test or validation inputs to measure fidelity on; record "
                               "a non-empty test split")
    return eval_split


def _info(ab: Abstraction, traces: Traces, method: str | BaseAbstractor, features: str,
          pca: int, fallback: str, split_by_prediction: bool, random_state: int
          ) -> dict[str, Any]:
    """Parameters and provenance of a fitted abstraction (an instance reports its own)."""
    est = ab.abstractor
    if isinstance(method, BaseAbstractor):
        params = est.get_params()
        method, features = est.kind, params.get("features", features)
        pca = params.get("pca_components", pca)
        split_by_prediction = params.get("split_by_prediction", split_by_prediction)
        random_state = params.get("random_state", random_state)
    return {"method": method, "features": features, "n_states": int(est.n_states), "pca": pca,
            "fallback": fallback, "simulation": ab.fsm.simulation,
            "split_by_prediction": split_by_prediction, "random_state": random_state,
            "layer": traces.meta.get("layer"), "state": traces.meta.get("state"),
            "model_sha256": traces.meta.get("model_sha256"),
            "dataset": traces.meta.get("dataset"), "fitted_on": "train",
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def abstract_run(
    run: RunDir | str | Path,
    *,
    n_states: int | str = N_STATES,
    method: str | BaseAbstractor = "kmeans",
    pca: int = 20,
    features: str = "margin",
    layer: int | None = None,
    fallback: str = "displacement",
    simulation: str = "probabilistic",
    split_by_prediction: bool = True,
    random_state: int = 0,
    cap: int = AUTO_CAP,
    save: bool = True,
    cluster: str | Engine | None = None,
) -> Abstraction:
    """Abstract a run (see module docstring) and return the :class:`Abstraction`.

    Parameters
    ----------
    n_states : int or 'auto'
        Abstract states (the FSM adds the initial state). ``'auto'`` tries the
        :func:`~stateseer.abstraction.analysis.metrics.auto_candidates` up to ``cap`` and keeps the
        knee of the *validation* simulation fidelity curve (never above ``cap``); the
        candidates, the curve and the reason go to the metrics (``auto``).
        With an abstractor instance as ``method``, an int is ignored (the instance's own
        ``n_states`` counts) and ``'auto'`` sets the instance's ``n_states``.
    method : str or BaseAbstractor
        A registered kind (``'kmeans'``, ``'gmm'``, ``'grid'`` ...) or an abstractor
        instance (fitted as a copy, with its own parameters).
    pca : int
        PCA components before clustering (``features='pca'``).
    features : {'margin', 'pca'}
        The space states are clustered in (see :mod:`stateseer.abstraction.abstractors.features`).
    layer : int, optional
        Must match the layer the traces were recorded from (re-record otherwise).
    fallback : {'displacement', 'nearest', 'token', 'stay'}
        FSM simulation rule for unseen (state, token) pairs.
    simulation : {'probabilistic', 'argmax'}
        How the FSM alone predicts: the class of a tracked distribution over states
        (default), or the label of the single most-frequent path's last state. Both
        figures go to the metrics (``simulation_fidelity_argmax`` / ``_probabilistic``).
    split_by_prediction : bool
        Keep every state within one predicted class.
    cap : int
        Readability cap of ``n_states='auto'`` (default 40).
    cluster : str or Engine, optional
        Run the per-shard steps on Dask: ``local``, ``local:N``, ``tcp://HOST:PORT`` or an
        open engine (default: ``$STATESEER_CLUSTER``, else in this process). The results
        are the same bits; files are written only at the end, so a cluster lost midway
        leaves the old abstraction in place.
    """
    with engine_scope(cluster) as engine:
        return _abstract_run(run, engine, n_states=n_states, method=method, pca=pca,
                             features=features, layer=layer, fallback=fallback,
                             simulation=simulation, split_by_prediction=split_by_prediction,
                             random_state=random_state, cap=cap, save=save)


def _abstract_run(run: RunDir | str | Path, engine: Engine, *, n_states: int | str,
                  method: str | BaseAbstractor, pca: int, features: str, layer: int | None,
                  fallback: str, simulation: str, split_by_prediction: bool,
                  random_state: int, cap: int, save: bool) -> Abstraction:
    """:func:`abstract_run` on an open engine."""
    run = run if isinstance(run, RunDir) else RunDir(run)
    if run.exists():
        _ = run.config  # a damaged config.json refuses, in one line, as every command does
    run.clean_stray()
    t0 = time.perf_counter()
    traces = fresh_traces(run)
    if layer is not None and layer != traces.meta.get("layer"):
        raise AbstractionError(
            f"the traces were recorded from layer {traces.meta.get('layer')}, not {layer}; "
            f"re-record with `stateseer record {run.path} --layer {layer}`"
        )
    alphabet = _read_alphabet(run)
    params = {"pca": pca, "features": features, "fallback": fallback,
              "simulation": simulation, "split_by_prediction": split_by_prediction,
              "random_state": random_state, "cluster": engine}
    auto = None
    if n_states == "auto":
        n_states, auto = _auto_states(traces, alphabet, method, cap, **params)
        method = _with_states(method, n_states)
    elif not isinstance(n_states, (int, np.integer)) or isinstance(n_states, bool):
        raise AbstractionError(f"--states must be a positive integer or 'auto', not {n_states!r}")
    eval_split = _eval_split(traces)
    # a big run's states and simulated paths go to files (mapped: the kernel's pages, not
    # the process's memory; at 1M inputs 0.3 GB), removed once saved
    steps = traces.meta.get("splits", {}).get("train", {}).get("n_steps", 0)
    scratch = claim(run.path / SCRATCH) if steps > sharded.PIECE_STEPS else None
    try:
        # one BLAS thread: the run's own threads keep the cores busy, and BLAS threads
        # left spinning after a call took CPU from them (1.7 -> 1.6 s on 1M steps, 2 cores)
        with threadpool_limits(1, user_api="blas"), \
                ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
            pool.submit(warm_up)  # the compiled simulation loads while the fit runs
            ab = fit_abstraction(traces, alphabet, n_states=int(n_states), method=method,
                                 pool=pool, out_dir=scratch, **params)
            figures = _figures(ab, traces, eval_split, int(ab.abstractor.n_states),
                               bool(getattr(ab.abstractor, "split_by_prediction_",
                                            split_by_prediction)), engine)
            ab.patterns = _patterns(ab.patterns)  # mined meanwhile
        if auto is not None:
            figures["auto"] = auto
        figures["seconds"] = time.perf_counter() - t0
        ab.metrics = figures
        ab.info = _info(ab, traces, method, features, pca, fallback, split_by_prediction,
                        random_state)
        ab.fsm.info = dict(ab.info)
        if save:
            ab.save(run.abstraction_dir)
            run.update_metrics(abstraction=figures)
    finally:
        if scratch is not None:  # what was mapped from it stays readable until dropped
            shutil.rmtree(scratch, ignore_errors=True)
    return ab
