"""RNN classifiers and the Traceable adapter protocol."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from stateseer.rnn_models.models import RecurrentAdapter, RNNClassifier
from stateseer.rnn_models.protocol import Traceable, TraceAdapter
from stateseer.rnn_models.record import record_texts
from stateseer.rnn_models.tokenizers import Vocab


def _stepwise(model: RNNClassifier, ids: list[int], layer: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference: step one token at a time through *Cell modules with the same weights."""
    cells = []
    for rnn in model.rnns:
        cell_cls = {"gru": nn.GRUCell, "lstm": nn.LSTMCell, "rnn": nn.RNNCell}[model.arch]
        cell = cell_cls(rnn.input_size, rnn.hidden_size)
        cell.load_state_dict({k[:-3]: v for k, v in rnn.state_dict().items()})
        cells.append(cell)
    states = [None] * len(cells)
    hs, ps = [], []
    with torch.no_grad():
        for tok in ids:
            x = model.embedding(torch.tensor([tok]))
            for i, cell in enumerate(cells):
                states[i] = cell(x, states[i])
                x = states[i][0] if model.arch == "lstm" else states[i]
                if i == layer % len(cells):
                    if model.arch == "lstm":
                        h, c = states[i]
                        keep = {"h": h, "c": c, "hc": torch.cat([h, c], -1)}[model.state]
                    else:
                        keep = states[i]
                    hs.append(keep[0].numpy().copy())
            ps.append(torch.softmax(model.head(x), -1)[0].numpy())
    return np.array(hs), np.array(ps)


@pytest.mark.parametrize(
    "arch,layers,layer,state",
    [("gru", 2, 0, "h"), ("gru", 2, -1, "h"), ("rnn", 1, -1, "h"), ("lstm", 3, 1, "h"),
     ("lstm", 2, -1, "c"), ("lstm", 1, 0, "hc")],
)
def test_trace_equals_stepping_one_token_at_a_time(arch, layers, layer, state):
    torch.manual_seed(0)
    model = RNNClassifier(arch, 30, 3, embed=8, hidden=16, layers=layers, state=state).eval()
    seqs = [[3, 4, 5, 6, 7], [9, 2], [12, 13, 14]]
    ids = torch.zeros(3, 5, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    lengths = torch.tensor([len(s) for s in seqs])
    with torch.no_grad():
        hidden, proba = model.trace(ids, lengths, layer)
    assert isinstance(model, Traceable)
    for i, s in enumerate(seqs):
        h_ref, p_ref = _stepwise(model, s, layer)
        np.testing.assert_allclose(hidden[i, : len(s)].numpy(), h_ref, atol=1e-5)
        np.testing.assert_allclose(proba[i, : len(s)].numpy(), p_ref, atol=1e-5)
    assert hidden.shape[-1] == model.state_size


def test_padding_does_not_change_outputs_and_empty_input_uses_h0():
    torch.manual_seed(1)
    model = RNNClassifier("gru", 20, 2, embed=4, hidden=8).eval()
    alone = model(torch.tensor([[5, 6]]), torch.tensor([2]))
    padded = model(torch.tensor([[5, 6, 0, 0], [1, 2, 3, 4], [0, 0, 0, 0]]),
                   torch.tensor([2, 4, 0]))
    torch.testing.assert_close(padded[0], alone[0])
    torch.testing.assert_close(padded[2], model.head.bias)  # head(h0) with h0 = 0
    h0, p0 = model.initial()
    assert torch.all(h0 == 0)
    torch.testing.assert_close(p0, torch.softmax(model.head.bias, -1))


def test_invalid_model_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown arch"):
        RNNClassifier("transformer", 10, 2)
    with pytest.raises(ValueError, match="layers"):
        RNNClassifier("gru", 10, 2, layers=4)
    with pytest.raises(ValueError, match="lstm"):
        RNNClassifier("gru", 10, 2, state="c")
    with pytest.raises(ValueError, match="does not exist"):
        RNNClassifier("gru", 10, 2, layers=2).initial(layer=2)


class HandWrittenElman(nn.Module):
    """A user's own model: nothing in it knows about stateseer."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(40, 6)
        self.w_in = nn.Linear(6, 10)
        self.w_rec = nn.Linear(10, 10, bias=False)
        self.classify = nn.Linear(10, 2)

    def states(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        h = torch.zeros(ids.shape[0], 10)
        out = []
        for t in range(ids.shape[1]):
            h = torch.tanh(self.w_in(x[:, t]) + self.w_rec(h))
            out.append(h)
        return torch.stack(out, 1)


class ElmanAdapter(TraceAdapter):
    """Adapter: four lines tell stateseer where the states and the head are."""

    def __init__(self, net: HandWrittenElman) -> None:
        super().__init__()
        self.net, self.n_classes, self.n_layers = net, 2, 1

    def trace(self, ids, lengths, layer=-1):
        h = self.net.states(ids)
        return h, torch.softmax(self.net.classify(h), -1)

    def initial(self, layer=-1):
        h0 = torch.zeros(10)
        return h0, torch.softmax(self.net.classify(h0), -1)


def test_hand_written_module_is_explorable_through_an_adapter():
    torch.manual_seed(2)
    net = HandWrittenElman()
    model = ElmanAdapter(net)
    vocab = Vocab.build([["good", "film"], ["bad", "plot"]])
    tr = record_texts(model, vocab, ["good film", "bad unseenword plot", ""])
    assert tr.n_inputs == 3 and tr.n_steps == 5
    assert tr.tokens(1) == ["bad", "unseenword", "plot"]
    assert tr.known(1).tolist() == [True, False, True]
    with torch.no_grad():
        ref = net.states(torch.from_numpy(vocab.encode(["good", "film"])[None]))[0].numpy()
        p0 = torch.softmax(net.classify(torch.zeros(10)), -1).numpy()
    np.testing.assert_allclose(tr.hidden[tr.steps(0)], ref, atol=1e-6)
    np.testing.assert_allclose(tr.final_proba[2], p0, atol=1e-6)  # empty input → head(h0)
    np.testing.assert_allclose(tr.final_proba[0], tr.proba[1], atol=1e-7)


def test_recurrent_adapter_wraps_user_modules():
    torch.manual_seed(3)
    emb, gru, out = nn.Embedding(20, 4), nn.GRU(4, 6, batch_first=True), nn.Linear(6, 3)
    model = RecurrentAdapter(emb, gru, out, n_classes=3)
    hidden, proba = model.trace(torch.tensor([[1, 2, 3]]), torch.tensor([3]))
    assert hidden.shape == (1, 3, 6) and proba.shape == (1, 3, 3)
    torch.testing.assert_close(proba.sum(-1), torch.ones(1, 3))
    with pytest.raises(ValueError, match="batch_first"):
        RecurrentAdapter(emb, nn.GRU(4, 6), out, n_classes=3)
    with pytest.raises(ValueError, match="not exposed"):
        model.trace(torch.tensor([[1]]), torch.tensor([1]), layer=3)
