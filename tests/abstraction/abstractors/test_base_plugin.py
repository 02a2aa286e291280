"""A new abstractor is one class in one file: defined here, registered here, then fitted on a
real run through ``fit_abstraction`` and ``abstract_run``, saved and reloaded.

The class below is the whole of it (its ``kind``, its own parameter, and the hooks that
say how to cluster the projected points); nothing else in the package changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest

from stateseer.abstraction.abstractors.base import (
    ABSTRACTORS,
    BaseAbstractor,
    positive_int,
    register_abstractor,
)
from stateseer.abstraction.pipeline import Abstraction, abstract_run, fit_abstraction
from stateseer.core.rundir import RunDir
from stateseer.core.traces import Traces


class QuantileAbstractor(BaseAbstractor):
    """States = equal-frequency bins of one random projection of the feature space."""

    kind = "quantile-test"
    _parameter_constraints: ClassVar[dict[str, Callable[[Any], bool]]] = {
        "projection_seed": positive_int}

    def __init__(self, n_states: int = 40, *, projection_seed: int = 1, **params: Any) -> None:
        super().__init__(n_states, **params)
        self.projection_seed = projection_seed

    def _direction(self, d: int) -> np.ndarray:
        return np.random.default_rng(self.projection_seed).normal(size=d).astype(np.float32)

    def _fit_states(self, Z, k, store=True):
        t = Z @ self._direction(Z.shape[1])
        edges = np.quantile(t, np.linspace(0, 1, k + 1)[1:-1])
        bins = np.searchsorted(edges, t)
        centers = np.stack([Z[bins == b].mean(0) if (bins == b).any() else Z.mean(0)
                            for b in range(k)]).astype(np.float32)
        model = {"edges": edges, "centers": centers}
        if store:
            self.edges_, self.cluster_centers_ = edges, centers
        return model

    def _n_fitted(self, model):
        return len(model["centers"])

    def _merge_split(self, models):
        self.edges_list_ = [m["edges"] for m in models]
        self.cluster_centers_ = np.concatenate([m["centers"] for m in models])

    def _assign(self, Z):
        return np.searchsorted(self.edges_, Z @ self._direction(Z.shape[1]))

    def _assign_class(self, Z, j):
        return np.searchsorted(self.edges_list_[j], Z @ self._direction(Z.shape[1]))

    def _arrays(self):
        edges = self.edges_list_ if self.split_by_prediction_ else [self.edges_]
        return {f"quantile_edges{i}": e for i, e in enumerate(edges)} | {
            "quantile_n": np.array(len(edges))}

    def _restore(self, d):
        edges = [d[f"quantile_edges{i}"] for i in range(int(d["quantile_n"]))]
        if self.split_by_prediction_:
            self.edges_list_ = edges
        else:
            self.edges_ = edges[0]


@pytest.fixture
def registered():
    register_abstractor(QuantileAbstractor)
    yield QuantileAbstractor
    ABSTRACTORS.pop(QuantileAbstractor.kind, None)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tomita_run):
    import shutil

    from stateseer.rnn_models.engine import record_run

    dst = tmp_path_factory.mktemp("plugin") / "run"
    shutil.copytree(tomita_run, dst)
    record_run(dst, splits=("train", "test"))
    return dst


def test_a_new_abstractor_fits_a_run_and_round_trips(registered, recorded, tmp_path):
    run = RunDir(recorded)
    traces = Traces(run.traces_dir)
    # by name, through the registry
    ab = fit_abstraction(traces, run.vocab_tokens(), n_states=6, method="quantile-test")
    assert isinstance(ab.abstractor, QuantileAbstractor) and ab.n_states <= 6
    train = traces["train"]
    np.testing.assert_array_equal(ab.states["train"] - 1,
                                  ab.abstractor.predict(train.hidden, train.proba))
    # as an instance, with its own parameters (n_states here is ignored)
    mine = QuantileAbstractor(n_states=4, projection_seed=3, split_by_prediction=False)
    ab2 = fit_abstraction(traces, run.vocab_tokens(), n_states=99, method=mine)
    assert ab2.abstractor is not mine and ab2.abstractor.projection_seed == 3
    assert ab2.n_states == 4 and not hasattr(mine, "projection_")  # the instance is untouched
    # the whole pipeline, saved and reloaded (registry maps the saved kind to the class)
    full = abstract_run(run, method=mine, save=True)
    assert full.info["method"] == "quantile-test" and full.info["n_states"] == 4
    back = Abstraction.load(run.abstraction_dir)
    assert type(back.abstractor) is QuantileAbstractor
    test = traces["test"]
    np.testing.assert_array_equal(back.assign(test.hidden, test.proba),
                                  full.assign(test.hidden, test.proba))
    np.testing.assert_array_equal(back.states["test"], full.states["test"])
    registered_kinds = set(ABSTRACTORS)
    assert {"kmeans", "gmm", "grid", "quantile-test"} <= registered_kinds


def test_registering_something_else_is_refused():
    from stateseer.abstraction.errors import AbstractionError

    with pytest.raises(AbstractionError, match="subclass BaseAbstractor"):
        register_abstractor(dict)  # type: ignore[arg-type]
