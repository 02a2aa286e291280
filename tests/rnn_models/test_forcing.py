"""State forcing: the forced forward pass against the recorded one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stateseer.core.errors import StateseerError
from stateseer.rnn_models.forcing import forced_run
from tests.conftest import one_line


def _setup(run_dir, split="test", n=40):
    from stateseer.abstraction.abstractors.centroids import state_centroids
    from stateseer.abstraction.pipeline import Abstraction
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.batching import pad_batch
    from stateseer.rnn_models.run import ModelRun

    run = ModelRun(run_dir)
    tr = Traces(run.traces_dir)
    ab = Abstraction.load(run.abstraction_dir)
    te = tr[split]
    idx = np.flatnonzero(te.lengths > 0)[:n]
    seqs = [np.asarray(te.token_ids[te.steps(int(i))], np.int64) for i in idx]
    ids, lens = pad_batch(seqs, np.arange(len(seqs)))
    cent, _ = state_centroids(tr["train"].hidden, ab.states["train"], ab.fsm.n_states)
    return run.load_model(), ab, te, idx, torch.as_tensor(ids), torch.as_tensor(lens), cent


def test_no_forcing_reproduces_the_recorded_run(explored_run):
    """A 2-layer GRU traced at its top layer: with an all-False mask the forced pass is the
    model's own forward pass, step by step."""
    model, ab, te, idx, ids, lens, cent = _setup(explored_run)
    r = forced_run(model, ids, lens, ab.assign, cent, mask=np.zeros(ids.shape, bool))
    assert not r.forced.any()
    np.testing.assert_allclose(r.final_proba, te.final_proba[idx], atol=1e-5)
    for b, i in enumerate(idx):  # per-step predictions and assigned states, too
        sl = te.steps(int(i))
        np.testing.assert_allclose(r.proba[b, : lens[b]], te.proba[sl], atol=1e-5)
        assert r.states[b, : lens[b]].tolist() == ab.states["test"][sl].tolist()


def test_forcing_every_step_puts_the_head_on_the_centroids(explored_run):
    model, ab, _te, idx, ids, lens, cent = _setup(explored_run)
    r = forced_run(model, ids, lens, ab.assign, cent)
    assert r.forced[np.arange(ids.shape[1]) < lens[:, None].numpy()].all()
    # the head (linear + softmax) applied to the centroid of the state at the last step
    last = r.states[np.arange(len(idx)), lens.numpy() - 1]
    with torch.no_grad():
        want = torch.softmax(model.head(torch.as_tensor(cent[last])), -1).numpy()
    # a 2-layer GRU: the head reads the top layer, which is the traced (forced) one
    np.testing.assert_allclose(r.final_proba, want, atol=1e-5)


def test_forcing_one_step_changes_only_what_follows(explored_run):
    model, ab, _te, _idx, ids, lens, cent = _setup(explored_run)
    t = 2
    mask = np.zeros(ids.shape, bool)
    mask[:, t] = True
    base = forced_run(model, ids, lens, ab.assign, cent, mask=np.zeros(ids.shape, bool))
    r = forced_run(model, ids, lens, ab.assign, cent, mask=mask)
    np.testing.assert_allclose(r.proba[:, :t], base.proba[:, :t], atol=1e-6)
    assert not np.allclose(r.proba[:, t:], base.proba[:, t:])


def test_per_state_forcing_only_touches_that_state(explored_run):
    model, ab, _te, idx, ids, lens, cent = _setup(explored_run)
    s = int(np.bincount(ab.states["test"]).argmax())
    r = forced_run(model, ids, lens, ab.assign, cent, only_states=np.array([s]))
    assert r.forced.any()
    assert (r.states[r.forced] == s).all()
    row = forced_run(model, ids, lens, ab.assign, cent,
                     row_state=np.full(len(idx), s))
    np.testing.assert_allclose(row.final_proba, r.final_proba, atol=1e-6)


def test_lstm_hidden_and_cell_states_can_be_forced(tomita_run):
    from stateseer.rnn_models.models import RNNClassifier

    torch.manual_seed(0)
    model = RNNClassifier("lstm", 5, 2, embed=4, hidden=6, state="hc").eval()
    ids = torch.tensor([[2, 3, 4, 2], [3, 3, 0, 0]])
    lens = torch.tensor([4, 2])
    cent = np.random.default_rng(0).normal(size=(3, 12)).astype(np.float32)
    assign = lambda h, p: np.zeros(len(h), np.int64) + 1  # noqa: E731
    r = forced_run(model, ids, lens, assign, cent)
    with torch.no_grad():
        want = torch.softmax(model.head(torch.as_tensor(cent[1, :6])), -1).numpy()
    np.testing.assert_allclose(r.final_proba, np.stack([want, want]), atol=1e-5)


def test_bad_centroids_and_models_get_one_line_errors(explored_run):
    model, ab, _te, _idx, ids, lens, cent = _setup(explored_run, n=3)
    with pytest.raises(StateseerError) as e:
        forced_run(model, ids, lens, ab.assign, cent[:, :5])
    assert "recompute" in one_line(e.value)
    with pytest.raises(StateseerError) as e:
        forced_run(torch.nn.Linear(2, 2), ids, lens, ab.assign, cent)
    assert "`initial(layer)`" in one_line(e.value)
    with pytest.raises(StateseerError) as e:
        forced_run(model, ids, lens, ab.assign, cent, mask=np.ones((1, 1), bool))
    assert "shape" in one_line(e.value)
