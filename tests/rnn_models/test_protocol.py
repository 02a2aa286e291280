"""The model protocol: a user's hand-written model gets attribution and forcing, and a model
without an optional method gets a one-line error naming it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from stateseer.rnn_models.attribution import attribute
from stateseer.rnn_models.forcing import forced_run
from stateseer.rnn_models.models import RNNClassifier
from stateseer.rnn_models.protocol import Embeddable, ModelProtocolError, Steppable, Traceable
from tests.conftest import one_line

H, C = 7, 3


class TinyGRU(nn.Module):
    """Only the required part: nothing here comes from stateseer."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 5)
        self.cell = nn.GRUCell(5, H)
        self.out = nn.Linear(H, C)
        self.n_classes, self.n_layers = C, 1

    def scan(self, x: torch.Tensor) -> torch.Tensor:
        h, hs = x.new_zeros(len(x), H), []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            hs.append(h)
        return torch.stack(hs, 1)

    def trace(self, ids, lengths, layer=-1):
        hs = self.scan(self.emb(ids))
        return hs, torch.softmax(self.out(hs), -1)

    def initial(self, layer=-1):
        h0 = torch.zeros(H)
        return h0, torch.softmax(self.out(h0), -1)


class FullGRU(TinyGRU):
    """The same model with the two optional capabilities, a few lines each."""

    def embed(self, ids):
        return self.emb(ids)

    def forward_from_embeddings(self, emb, lengths=None):
        return self.out(self.scan(emb)[:, -1])

    def initial_state(self, batch_size):
        return torch.zeros(batch_size, H)

    def step(self, state, ids):
        return self.cell(self.emb(ids), state)

    def get_state(self, state, layer=-1):
        return state

    def set_state(self, state, layer, value):
        return value

    def state_proba(self, state):
        return torch.softmax(self.out(state), -1)


@pytest.fixture
def full() -> FullGRU:
    torch.manual_seed(0)
    return FullGRU().eval()


IDS = np.array([3, 7, 2, 9, 4, 4, 11])
TOKENS = [f"t{i}" for i in IDS]


def test_protocol_checks():
    assert isinstance(TinyGRU(), Traceable) and not isinstance(TinyGRU(), Embeddable)
    assert isinstance(FullGRU(), Embeddable) and isinstance(FullGRU(), Steppable)
    model = RNNClassifier("gru", 10, 2, embed=4, hidden=4)
    assert isinstance(model, Traceable | Embeddable | Steppable)


def test_hand_written_model_gets_complete_integrated_gradients(full):
    for target in ("predicted", "contrastive"):
        a = attribute(full, IDS, TOKENS, method="ig", target=target)
        emb = full.emb(torch.as_tensor(IDS)[None]).detach()
        with torch.no_grad():
            z, z0 = full.out(full.scan(emb)[:, -1])[0], full.out(full.scan(0 * emb)[:, -1])[0]
        if target == "predicted":
            fx, f0 = (float(torch.softmax(v, -1)[a.target_class]) for v in (z, z0))
        else:
            fx, f0 = (float(v[a.target_class] - v[a.contrast_class]) for v in (z, z0))
        assert a.output == pytest.approx(fx, abs=1e-5)
        assert a.scores.sum() == pytest.approx(fx - f0, abs=1e-3 + 1e-2 * abs(fx - f0))


def test_hand_written_model_can_be_forced(full):
    """Nothing replaced: exactly the model's own run; everything replaced: the head on the
    centroids."""
    ids = torch.tensor([[3, 7, 2, 9], [5, 6, 0, 0]])
    lens = torch.tensor([4, 2])
    cent = np.random.default_rng(0).normal(size=(4, H)).astype(np.float32)
    assign = lambda h, p: (np.abs(h).sum(1) * 10).astype(np.int64) % 4  # noqa: E731
    r = forced_run(full, ids, lens, assign, cent, mask=np.zeros(ids.shape, bool))
    with torch.no_grad():
        hs, proba = full.trace(ids, lens)
    np.testing.assert_allclose(r.proba, proba.numpy(), atol=1e-6)
    want = np.stack([assign(hs[:, t].numpy(), None) for t in range(4)], 1)
    assert (r.states == want).all() and not r.forced.any()
    r = forced_run(full, ids, lens, assign, cent)
    with torch.no_grad():
        want = torch.softmax(full.out(torch.as_tensor(cent[r.states[[0, 1], [3, 1]]])), -1)
    np.testing.assert_allclose(r.final_proba, want.numpy(), atol=1e-6)


def test_a_model_without_embeddings_gets_occlusion_and_a_one_line_error():
    torch.manual_seed(0)
    tiny, full = TinyGRU().eval(), FullGRU().eval()
    full.load_state_dict(tiny.state_dict())
    for method, word in (("ig", "integrated gradients"), ("gxi", "gradient")):
        with pytest.raises(ModelProtocolError) as e:
            attribute(tiny, IDS, TOKENS, method=method)
        msg = one_line(e.value)
        assert "`embed(ids)`" in msg and word in msg and "occlusion" in msg
    for baseline in ("pad", "unk"):  # by token id on the minimal model ...
        a = attribute(tiny, IDS, TOKENS, method="occlusion", target="contrastive",
                      baseline=baseline)
        b = attribute(full, IDS, TOKENS, method="occlusion", target="contrastive",
                      baseline=baseline)
        assert a.extra["by"] == "token id" and (a.target_class, a.contrast_class) == (
            b.target_class, b.contrast_class)
        with torch.no_grad():  # ... is the drop when the token is replaced by <pad>/<unk>
            ids = torch.as_tensor(IDS)[None].repeat(2, 1)
            ids[1, 3] = 0 if baseline == "pad" else 1
            z = torch.log(tiny.trace(ids, None)[1][:, -1])
        drop = float((z[0, a.target_class] - z[0, a.contrast_class])
                     - (z[1, a.target_class] - z[1, a.contrast_class]))
        assert a.scores[3] == pytest.approx(drop, abs=1e-5)
        if baseline == "unk":  # the same as replacing the embedding by <unk>'s
            np.testing.assert_allclose(a.scores, b.scores, atol=1e-4)


def test_a_model_without_stepping_methods_cannot_be_forced():
    with pytest.raises(ModelProtocolError) as e:
        forced_run(TinyGRU(), torch.tensor([[1, 2]]), torch.tensor([2]),
                   lambda h, p: np.zeros(len(h), np.int64), np.zeros((1, H), np.float32))
    msg = one_line(e.value)
    assert "`initial_state(batch_size)`" in msg and "state forcing" in msg


def test_token_occlusion_of_a_built_in_model_equals_embedding_occlusion():
    """<pad> has the zero embedding in the built-in models, so both ways agree."""
    torch.manual_seed(1)
    model = RNNClassifier("lstm", 20, 2, embed=6, hidden=8).eval()

    class OnlyTrace:
        n_classes, n_layers = 2, 1
        trace, initial = model.trace, model.initial

    a = attribute(OnlyTrace(), IDS, TOKENS, method="occlusion")
    b = attribute(model, IDS, TOKENS, method="occlusion")
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)
    assert a.output == pytest.approx(b.output, abs=1e-6)


@pytest.mark.parametrize("layer", [0, 1])
def test_built_in_models_step_exactly_like_they_trace(layer):
    """Forcing nothing at a lower or the top layer reproduces trace (states and predictions),
    for a 2-layer LSTM traced on h and c and a 2-layer nn.GRU behind RecurrentAdapter."""
    from stateseer.rnn_models.models import RecurrentAdapter

    torch.manual_seed(4)
    lstm = RNNClassifier("lstm", 20, 3, embed=5, hidden=6, layers=2, state="hc").eval()
    gru = RecurrentAdapter(nn.Embedding(20, 5), nn.GRU(5, 6, num_layers=2, batch_first=True),
                           nn.Linear(6, 3), n_classes=3).eval()
    ids, lens = torch.tensor([[3, 7, 2, 9], [5, 6, 0, 0]]), torch.tensor([4, 2])
    for model, lay in ((lstm, layer), (gru, -1)):
        seen = []

        def assign(h, p, seen=seen):
            seen.append(h)
            return np.zeros(len(h), np.int64)

        cent = np.zeros((1, model.initial(lay)[0].shape[0]), np.float32)
        r = forced_run(model, ids, lens, assign, cent, layer=lay,
                       mask=np.zeros(ids.shape, bool))
        with torch.no_grad():
            hidden, proba = model.trace(ids, lens, lay)
        np.testing.assert_allclose(r.proba, proba.numpy(), atol=1e-6)
        np.testing.assert_allclose(np.stack(seen, 1), hidden.numpy(), atol=1e-6)


def test_forcing_a_lower_layer_changes_the_layer_above_at_once():
    torch.manual_seed(5)
    model = RNNClassifier("gru", 20, 3, embed=5, hidden=6, layers=2).eval()
    ids, lens = torch.tensor([[3, 7, 2]]), torch.tensor([3])
    cent = np.random.default_rng(1).normal(size=(1, 6)).astype(np.float32)
    mask = np.zeros((1, 3), bool)
    mask[0, 1] = True
    r = forced_run(model, ids, lens, lambda h, p: np.zeros(len(h), np.int64), cent, layer=0,
                   mask=mask)
    with torch.no_grad():  # by hand: layer 0 on the centroid at step 1, layer 1 reads it
        x = model.embedding(ids)
        h0a = model.rnns[0](x[:, :1])[1]
        h1a = model.rnns[1](h0a.transpose(0, 1))[1]
        h0b = torch.as_tensor(cent)[None]
        _, h1b = model.rnns[1](h0b.transpose(0, 1), h1a)
        want = torch.softmax(model.head(h1b[0]), -1)
    np.testing.assert_allclose(r.proba[0, 1], want[0].numpy(), atol=1e-6)
