"""The abstractor base estimator and the registry of abstractors.

An abstractor maps hidden states to a few abstract states, scikit-learn style. Every
abstractor is a :class:`BaseAbstractor`: the base holds the parameters all of them share
(``n_states``, ``features``, ``pca_components`` ...), validates them in :meth:`fit`
(``_parameter_constraints``), projects the states into the chosen space
(:mod:`stateseer.abstraction.abstractors.features`), optionally clusters each predicted class apart
(``split_by_prediction``), assigns rows chunk by chunk, and saves and loads itself as plain
arrays (no pickle). A subclass only says how to cluster the projected points:

``_fit_states(Z, k, store)``   fit ``k`` states on points Z; return the fitted model
``_n_fitted(model)``           how many states that model has
``_merge_split(models)``       combine one model per predicted class
``_assign(Z)``                 state of each row (one model)
``_assign_class(Z, j)``        state of each row within class ``j``'s model (split mode)
``_arrays()``, ``_restore(d)`` its fitted state as arrays, and back

and joins :data:`ABSTRACTORS` with :func:`register_abstractor` (in its own module), which
is all ``stateseer abstract --method NAME``, :func:`stateseer.abstraction.pipeline.fit_abstraction`
and persistence need. ``tests/abstraction/abstractors/test_base_plugin.py`` adds one in a single
file.

If the intermediate predictions are passed to ``fit``/``predict`` (``proba``) and
``split_by_prediction`` is on, every abstract state holds hidden states of a single
predicted class: the states are clustered within each class separately, with as many
states per class as its share of the points warrants (at least one). Since the
prediction is a function of the hidden state, this is still an abstraction of ``h``
alone; it guarantees that no state straddles the classifier's decision boundary.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from stateseer.abstraction.abstractors.features import (
    FEATURES,
    Projection,
    as_2d,
    check_finite,
    iter_rows,
    nearest_center,
    sample_rows,
)
from stateseer.abstraction.arrays import numpy_threads
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.atomic import atomic_save_npz
from stateseer.core.defaults import N_STATES
from stateseer.core.errors import DAMAGED_NPY

__all__ = ["ABSTRACTORS", "BUILTINS", "ENTRY_POINT_GROUP", "BaseAbstractor", "abstractor_names",
           "load_builtins", "make_abstractor", "register_abstractor"]

ABSTRACTORS: dict[str, type[BaseAbstractor]] = {}
"""Registered abstractors by ``kind`` (the ``--method`` name): the built-in ones, then those of
installed packages (entry-point group :data:`ENTRY_POINT_GROUP`, loaded on first use)."""

#: a third-party package adds abstractors under this entry-point group: ``kind =
#: module:Class``, the class a :class:`BaseAbstractor` subclass (registered on loading)
ENTRY_POINT_GROUP = "stateseer.abstractors"
_plugins_loaded = False


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def positive_int(v: Any) -> bool:
    """Constraint: a positive integer."""
    return _is_int(v) and v >= 1


def non_negative_int(v: Any) -> bool:
    """Constraint: a non-negative integer."""
    return _is_int(v) and v >= 0


def one_of(*options: Any) -> Callable[[Any], bool]:
    """Constraint: one of ``options``."""
    check = lambda v: v in options  # noqa: E731
    check.__doc__ = f"one of {', '.join(map(str, options))}"
    return check


def boolean(v: Any) -> bool:
    """Constraint: True or False."""
    return isinstance(v, (bool, np.bool_))


def seed(v: Any) -> bool:
    """Constraint: None or a non-negative integer."""
    return v is None or non_negative_int(v)


def register_abstractor(cls: type[BaseAbstractor]) -> type[BaseAbstractor]:
    """Class decorator: add ``cls`` to :data:`ABSTRACTORS` under ``cls.kind``.

    Raises
    ------
    AbstractionError
        ``cls`` is not a :class:`BaseAbstractor` with a ``kind``.
    """
    if not (isinstance(cls, type) and issubclass(cls, BaseAbstractor) and cls.kind):
        raise AbstractionError(f"{cls!r} is not a BaseAbstractor subclass with a 'kind' name; "
                               "subclass BaseAbstractor and set kind = 'name'")
    ABSTRACTORS[cls.kind] = cls
    return cls


#: the built-in abstractors' modules, in the order ``--method`` lists them
BUILTINS = ("kmeans", "gmm", "grid")


def load_builtins() -> None:
    """Register the built-in abstractors (importing their modules, in :data:`BUILTINS`
    order); every reader of the registry calls it first."""
    import importlib

    for name in BUILTINS:
        importlib.import_module(f"stateseer.abstraction.abstractors.{name}")


def abstractor_names() -> list[str]:
    """Every registered ``kind``, the installed packages' included (``--method`` choices)."""
    global _plugins_loaded
    load_builtins()
    if not _plugins_loaded:
        _plugins_loaded = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name not in ABSTRACTORS:
                register_abstractor(ep.load())
    return list(ABSTRACTORS)


def make_abstractor(method: str | BaseAbstractor, **params: Any) -> BaseAbstractor:
    """The abstractor called ``method`` (a registered ``kind``), built with ``params``.

    An abstractor instance is returned as it is when no ``params`` are given, or as an
    unfitted copy with ``params`` set (``sklearn.base.clone`` + ``set_params``).
    """
    if isinstance(method, BaseAbstractor):
        if not params:
            return method
        from sklearn.base import clone

        return clone(method).set_params(**params)
    if not isinstance(method, str) or method not in abstractor_names():
        raise AbstractionError(
            f"unknown --method {method!r}; choose one of: {', '.join(ABSTRACTORS)}")
    return ABSTRACTORS[method](**params)


class BaseAbstractor(ClusterMixin, BaseEstimator):
    """Base of every abstractor: projection, class split, chunked assignment, persistence.

    Parameters
    ----------
    n_states : int, default 40
        Abstract states to fit (a class split or a grid may fit fewer: ``n_states_``).
    pca_components : int, default 20
        Dimensions of the ``pca`` space.
    max_fit_samples : int, default 30_000
        Rows (drawn with ``random_state``) the projection and the clustering are fitted on.
    chunk_size : int, default 65_536
        Rows per block when assigning states.
    split_by_prediction : bool, default False
        Cluster each predicted class apart (needs ``proba``).
    features : {'margin', 'pca'}, default 'margin'
        ``margin``: the classifier's logit differences (standardised, then weighted by
        :data:`stateseer.abstraction.abstractors.features.MARGIN_WEIGHT`) plus principal axes of h
        orthogonal
        to the head, standardised (needs ``proba``; what ``stateseer abstract`` and the
        README's figures use). ``pca``: PCA of h to ``pca_components`` dimensions
        (DeepSeer).
    residual_components : int, default 1
        Residual axes per logit difference (``C - 1`` differences for ``C`` classes).
    random_state : int or None, default 0

    Attributes
    ----------
    projection_ : Projection
        The fitted space.
    cluster_centers_ : ndarray of shape (n_states_, n_components)
    state_class_ : ndarray of shape (n_states_,) or None
        Predicted class of each state when split by prediction.
    n_states_ : int
    n_features_in_ : int
    labels_ : ndarray of shape (n_samples,)
        State of every row ``fit`` was given (so ``fit_predict`` works).
    """

    kind: ClassVar[str] = ""
    _parameter_constraints: ClassVar[dict[str, Callable[[Any], bool]]] = {
        "n_states": positive_int,
        "pca_components": positive_int,
        "max_fit_samples": positive_int,
        "chunk_size": positive_int,
        "split_by_prediction": boolean,
        "features": one_of(*FEATURES),
        "residual_components": non_negative_int,
        "random_state": seed,
    }

    def __init__(self, n_states: int = N_STATES, *, pca_components: int = 20,
                 max_fit_samples: int = 30_000, chunk_size: int = 65_536,
                 split_by_prediction: bool = False, features: str = "margin",
                 residual_components: int = 1, random_state: int | None = 0) -> None:
        self.n_states = n_states
        self.pca_components = pca_components
        self.max_fit_samples = max_fit_samples
        self.chunk_size = chunk_size
        self.split_by_prediction = split_by_prediction
        self.features = features
        self.residual_components = residual_components
        self.random_state = random_state

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The base's parameters and those each subclass adds in its own ``__init__``
        (subclasses pass the shared ones on with ``**params``)."""
        names: set[str] = set()
        for klass in cls.__mro__:
            if issubclass(klass, BaseAbstractor) and "__init__" in vars(klass):
                names |= {p.name for p in inspect.signature(klass.__init__).parameters.values()
                          if p.name != "self" and p.kind not in (p.VAR_KEYWORD,
                                                                 p.VAR_POSITIONAL)}
        return sorted(names)

    # validation -----------------------------------------------------------------------
    def _validate_params(self) -> None:
        """Check every parameter against ``_parameter_constraints`` (merged over the MRO)."""
        constraints: dict[str, Callable[[Any], bool]] = {}
        for klass in reversed(type(self).__mro__):
            constraints.update(vars(klass).get("_parameter_constraints", {}))
        for name, check in constraints.items():
            value = getattr(self, name)
            if not check(value):
                want = (check.__doc__ or "valid").strip().removeprefix("Constraint: ")
                want = want.rstrip(".")
                if name == "features":
                    raise AbstractionError(f"unknown features {value!r}; choose pca or margin")
                raise AbstractionError(
                    f"{name} must be {want}, not {value!r}; fix {type(self).__name__}({name}=...)"
                )

    def _check_size(self, n: int) -> None:
        if n == 0:
            raise AbstractionError("no hidden states to abstract: the split is empty")
        if self.n_states > n:
            raise AbstractionError(
                f"{self.n_states} states requested but only {n} hidden states recorded; "
                f"ask for at most {n} (e.g. --states {max(1, min(n, 40) // 2)})"
            )

    # fitting ----------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None, proba: np.ndarray | None = None,
            final_proba: np.ndarray | None = None) -> BaseAbstractor:
        """Fit the projection and the clustering on (a sample of) ``X``.

        Parameters
        ----------
        X : array-like of shape (n_steps, state_size)
            Hidden states; memory maps are read in chunks.
        y : ignored
        proba : ndarray of shape (n_steps, n_classes), optional
            Intermediate predictions (``margin`` features, ``split_by_prediction``).
        final_proba : ndarray of shape (n_steps, n_classes), optional
            The final prediction of each step's input: ``margin`` features then add the
            value axes (:meth:`~stateseer.abstraction.abstractors.features.Projection.fit`).

        Returns
        -------
        self
        """
        self._validate_params()
        X = as_2d(X)
        n, d = X.shape
        self._check_size(n)
        rng = np.random.default_rng(self.random_state)
        idx = sample_rows(n, self.max_fit_samples, rng)
        whole = n <= self.max_fit_samples and isinstance(X, np.ndarray)  # no copy needed
        S = np.asarray(X if whole else X[idx], dtype=np.float32)
        finite = np.isfinite(S).all(axis=1)
        if not finite.all():
            check_finite(np.asarray(X[idx[~finite][:1]], dtype=np.float32),
                         int(idx[~finite][0]))
        self.n_features_in_ = d
        for name, A in (("proba", proba), ("final_proba", final_proba)):
            if A is not None and len(A) != n:
                raise AbstractionError(
                    f"{name} has {len(A)} rows for {n} hidden states; give one row per step "
                    "(a split's final_proba is one per input: index it by step_input)")
        P = None if proba is None else np.asarray(proba if whole else proba[idx])
        F = None if final_proba is None else np.asarray(final_proba if whole
                                                        else final_proba[idx])
        n_comp = self.pca_components if self.features == "pca" else self.residual_components
        # one BLAS and one OpenMP thread: k-means sums its per-thread partial centres, so
        # its bits depended on the cores (a driver beside a LocalCluster, whose nannies set
        # OMP_NUM_THREADS=1, fitted other centres than the same command in process); the
        # fit is on a sample (0.2 s), the same states on any machine are worth more
        with threadpool_limits(1):
            self.projection_ = Projection.fit(self.features, S, P, n_comp, self.random_state,
                                              final=F)
            Z = self.projection_.transform(S, P)
            self.split_by_prediction_ = bool(self.split_by_prediction and proba is not None)
            if self.split_by_prediction_:
                self._fit_split(Z, P.argmax(axis=1), P.shape[1])
            else:
                self.state_class_ = None
                self._fit_states(Z, self.n_states, store=True)
        # A class with fewer points than its share of states, or a grid whose cells do not
        # divide n_states, yields fewer states: the fitted count is the true one.
        self.n_states_ = len(self.cluster_centers_)
        self.labels_ = self.predict(X, proba)
        return self

    def _fit_split(self, Z: np.ndarray, pred: np.ndarray, n_classes: int) -> None:
        """One clustering per predicted class, states shared out by the classes' sizes."""
        counts = np.bincount(pred, minlength=n_classes)
        present = np.flatnonzero(counts)
        if self.n_states < len(present):
            raise AbstractionError(
                f"{self.n_states} states cannot separate {len(present)} predicted classes; "
                f"ask for at least {len(present)} states"
            )
        # States per class proportional to its share, at least one each (largest remainder).
        share = counts[present] / counts.sum() * (self.n_states - len(present))
        alloc = 1 + np.floor(share).astype(int)
        rest = self.n_states - alloc.sum()
        alloc[np.argsort(-(share - np.floor(share)))[:rest]] += 1
        alloc = np.minimum(alloc, counts[present])
        jobs = [(Z[pred == c], int(k)) for c, k in zip(present, alloc, strict=True)]

        def fit_one(job: tuple[np.ndarray, int]) -> Any:
            with threadpool_limits(1):  # OpenMP's thread count is set per thread
                return self._fit_states(*job, store=False)

        if len(jobs) > 1 and numpy_threads() >= 2:
            # the classes' fits are independent (each seeded alone), so they run side by
            # side on one thread each: the same states as one after another
            with ThreadPoolExecutor(min(len(jobs), numpy_threads())) as pool:
                models = list(pool.map(fit_one, jobs))
        else:
            models = [fit_one(job) for job in jobs]
        classes = [int(c) for c, m in zip(present, models, strict=True)
                   for _ in range(self._n_fitted(m))]
        self._present = present
        self._class_slices = np.cumsum([0] + [self._n_fitted(m) for m in models])
        self._merge_split(models)
        self.state_class_ = np.array(classes, dtype=np.int64)

    # assignment -------------------------------------------------------------------------
    def predict(self, X: Any, proba: np.ndarray | None = None, *,
                rows: tuple[int, int] | None = None) -> np.ndarray:
        """Abstract state of every row, shape (n_steps,), values in ``[0, n_states_)``.

        ``proba`` is required with ``margin`` features or a class split. ``rows``
        ``(lo, hi)``: only rows ``lo`` to ``hi`` (chunks then start at ``lo``; with ``lo``
        a multiple of ``chunk_size`` every row's state is the one a whole ``predict``
        gives, bit for bit: the chunks are the same), shape (hi - lo,).
        """
        check_is_fitted(self, "projection_")
        X = as_2d(X)
        if X.shape[1] != self.n_features_in_:
            raise AbstractionError(
                f"hidden states have {X.shape[1]} dimensions but the abstraction was fitted on "
                f"{self.n_features_in_}; re-run `stateseer abstract` for this model"
            )
        if (self.split_by_prediction_ or self.projection_.kind == "margin") and proba is None:
            raise AbstractionError("this abstraction needs the intermediate predictions: "
                                   "pass proba")
        lo, hi = (0, X.shape[0]) if rows is None else (int(rows[0]), min(int(rows[1]),
                                                                          X.shape[0]))
        if not 0 <= lo <= hi:
            raise AbstractionError(f"rows {rows} are not a range of the {X.shape[0]} rows")
        out = np.empty(hi - lo, dtype=np.int64)
        n_chunks = -(-(hi - lo) // self.chunk_size)
        if n_chunks < 4 or numpy_threads() < 2:
            self._predict_rows(X, proba, out, lo, hi, lo)
            return out
        # two runs of whole chunks on two threads of one BLAS thread each: every chunk is
        # computed as it is alone, so the states are those of one thread (1M steps of 256
        # floats: 0.34 -> 0.25 s on 2 cores)
        mid = lo + (n_chunks // 2) * self.chunk_size
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda r: self._predict_rows(X, proba, out, *r, lo),
                          [(lo, mid), (mid, hi)]))
        return out

    def _predict_rows(self, X: Any, proba: np.ndarray | None, out: np.ndarray, lo: int,
                      hi: int, base: int) -> None:
        """:meth:`predict` of rows ``lo`` to ``hi`` (chunk by chunk from ``lo``) into
        ``out``, whose first element is row ``base``."""
        for start, block, P in iter_rows(X, self.chunk_size, proba, lo=lo, hi=hi,
                                         half=True):
            Z = self.projection_.transform(block, P)
            if not np.isfinite(Z).all():  # NaN/inf in a hidden state reaches its coordinates
                check_finite(block, start)
            stop = start + len(block)
            out[start - base:stop - base] = (self._assign_split(Z, P.argmax(axis=1))
                                             if self.split_by_prediction_ else self._assign(Z))

    def _assign_split(self, Z: np.ndarray, pred: np.ndarray) -> np.ndarray:
        out = np.empty(len(Z), dtype=np.int64)
        for j, c in enumerate(self._present):
            m = pred == c
            if m.any():
                out[m] = self._class_slices[j] + self._assign_class(Z[m], j)
        other = ~np.isin(pred, self._present)  # a class never predicted in training
        if other.any():
            out[other] = nearest_center(Z[other], self.cluster_centers_)
        return out

    def transform(self, X: Any, proba: np.ndarray | None = None) -> np.ndarray:
        """Coordinates the states are clustered in, shape (n_steps, n_components)."""
        check_is_fitted(self, "projection_")
        if X.shape[0] == 0:
            return np.zeros((0, self.projection_.n_components), np.float32)
        return np.concatenate([self.projection_.transform(block, P)
                               for _, block, P in iter_rows(X, self.chunk_size, proba)])

    # subclass hooks ---------------------------------------------------------------------
    def _fit_states(self, Z: np.ndarray, k: int, store: bool = True) -> Any:
        raise NotImplementedError

    def _n_fitted(self, model: Any) -> int:
        """States of one fitted model (default: rows of its centres array)."""
        return len(model)

    def _merge_split(self, models: list[Any]) -> None:
        raise NotImplementedError

    def _assign(self, Z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _assign_class(self, Z: np.ndarray, j: int) -> np.ndarray:
        raise NotImplementedError

    def _arrays(self) -> dict[str, np.ndarray]:
        """The subclass's own fitted state as arrays (default: none)."""
        return {}

    def _restore(self, d: Any) -> None:
        """Set the subclass's own fitted state from :meth:`_arrays` output."""

    # persistence ------------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Fitted state as plain arrays (``np.savez``, no pickle); ``method`` names the kind."""
        check_is_fitted(self, "projection_")
        out = {
            "method": np.array(self.kind),
            "params": np.array(json.dumps(self.get_params())),
            "projection_kind": np.array(self.projection_.kind),
            **{f"projection_{k}": v for k, v in self.projection_.arrays.items()},
            "n_features_in": np.array(self.n_features_in_),
            "cluster_centers": self.cluster_centers_,
            "split": np.array(self.split_by_prediction_),
        }
        if self.split_by_prediction_:
            out["state_class"] = self.state_class_
            out["class_slices"] = np.asarray(self._class_slices)
            out["present"] = np.asarray(self._present)
        return {**out, **self._arrays()}

    @classmethod
    def from_arrays(cls, d: Any) -> BaseAbstractor:
        """Rebuild a fitted abstractor from :meth:`to_arrays` output (any registered kind).

        Raises
        ------
        AbstractionError
            The arrays are damaged, or of a kind that is not a ``cls``.
        """
        try:
            ab = make_abstractor(str(d["method"]), **json.loads(str(d["params"])))
            if not isinstance(ab, cls):
                raise AbstractionError(f"saved abstractor is a {type(ab).__name__}, not a "
                                       f"{cls.__name__}; load it with BaseAbstractor.load")
            keys = d.files if hasattr(d, "files") else d
            ab.projection_ = Projection(str(d["projection_kind"]), {
                k[len("projection_"):]: d[k] for k in keys
                if k.startswith("projection_") and k != "projection_kind"})
            ab.n_features_in_ = int(d["n_features_in"])
            ab.cluster_centers_ = d["cluster_centers"]
            ab.split_by_prediction_ = bool(d["split"])
            ab.n_states_ = len(ab.cluster_centers_)
            ab.state_class_ = d["state_class"] if ab.split_by_prediction_ else None
            if ab.split_by_prediction_:
                ab._class_slices, ab._present = d["class_slices"], d["present"]
            ab._restore(d)
            return ab
        except (KeyError, ValueError, TypeError) as exc:
            if isinstance(exc, AbstractionError):
                raise
            raise AbstractionError(
                f"saved abstraction is damaged ({exc}); re-run `stateseer abstract`"
            ) from None

    def save(self, path: str | Path) -> Path:
        """Write the fitted abstractor as an ``.npz`` of plain arrays, atomically."""
        return atomic_save_npz(path, **self.to_arrays())

    @classmethod
    def load(cls, path: str | Path) -> BaseAbstractor:
        """Read an abstractor written by :meth:`save` (its class comes from the file).

        Raises
        ------
        AbstractionError
            Missing or damaged file.
        """
        fix = f"rerun `stateseer abstract {Path(path).parent.parent}`"
        try:
            d = np.load(path, allow_pickle=False)
            if not hasattr(d, "files"):
                raise AbstractionError(f"{path} is corrupt (not an .npz archive); {fix}")
            with d:
                return cls.from_arrays(d)
        except FileNotFoundError:
            raise AbstractionError(f"{path} is missing; {fix}") from None
        except DAMAGED_NPY as exc:
            if isinstance(exc, AbstractionError):
                raise
            raise AbstractionError(
                f"{path} is corrupt ({' '.join(str(exc).split())[:120]}); {fix}"
            ) from None

